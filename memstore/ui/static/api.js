// The server's API with the signed-in token. The token lives in sessionStorage only
// (gone with the tab), and travels in the Authorization header: never in a URL or a cookie.

const KEY = "memstore.token";

export const token = {
  get: () => sessionStorage.getItem(KEY),
  set: (value) => sessionStorage.setItem(KEY, value),
  clear: () => sessionStorage.removeItem(KEY),
};

/** An error the server answered: its code and its own message. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** GET or POST a /ui/api path with query parameters; the parsed JSON or an ApiError. */
export async function call(path, params = {}, method = "GET") {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== "") query.set(k, String(v));
  }
  const url = `/ui/api/${path}${query.size ? `?${query}` : ""}`;
  const response = await fetch(url, {
    method,
    headers: { Authorization: `Bearer ${token.get() ?? ""}`, Accept: "application/json" },
    cache: "no-store",
    credentials: "omit",
  });
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (!response.ok) {
    const code = body?.error ?? "error";
    const message = body?.message ?? `${response.status} ${response.statusText}`;
    throw new ApiError(response.status, code, `${response.status} ${code}: ${message}`);
  }
  return body;
}
