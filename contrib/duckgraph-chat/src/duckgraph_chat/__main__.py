from duckgraph_chat.cli import main

raise SystemExit(main())
