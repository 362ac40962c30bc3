// The "token needed" page's script (core/ui/security.py): a browser never sends an address's fragment, the view it
// asked for (#/entity?name=...), so the login form carries it, and the login returns to it. The page that refuses a
// wrong token is /login's answer, without a fragment of its own: the one it was given stays.
const fragment = document.querySelector("input[name=fragment]");
if (location.hash) fragment.value = location.hash;
