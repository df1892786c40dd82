// Sign in: the token (typed, or from the link `baton serve` prints, in the URL's fragment,
// which no browser sends to a server) is posted once to POST /v1/session for an HttpOnly
// cookie, and dropped from the address bar and history at once.

function nextPath() {
  const next = new URLSearchParams(location.search).get("next") || "/";
  return next.startsWith("/") && !next.startsWith("//") && !next.startsWith("/\\") ? next : "/";
}

async function signIn(token) {
  const error = document.querySelector("[data-error]");
  error.textContent = "";
  const response = await fetch("/v1/session", {
    method: "POST",
    credentials: "same-origin",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify({ token }),
  });
  if (response.ok) {
    location.replace(nextPath());
    return;
  }
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    message = `${body.error.code}: ${body.error.message}`;
  } catch {
    // keep the status line
  }
  error.textContent = "Not signed in — " + message;
}

const form = document.querySelector("[data-sign-in]");
form.addEventListener("submit", (event) => {
  event.preventDefault();
  const input = form.querySelector("#token");
  const token = input.value.trim();
  input.value = "";
  if (token) signIn(token);
});

const fragment = new URLSearchParams(location.hash.slice(1));
const fromLink = fragment.get("token");
if (fromLink) {
  history.replaceState(null, "", location.pathname + location.search);
  signIn(fromLink);
} else {
  form.querySelector("#token").focus();
}
