"""Seed 002's Python quick start, against ``memstore serve --api mindlayer``.

Start the server (no key, no provider needed), then run this script::

    memstore serve --api mindlayer --data data/ &
    python examples/mindlayer_quickstart.py            # or: ... http://127.0.0.1:8080

It stores one fact, finds it by keyword, sets a personality and prints the
prompt-ready context. Only the standard library is used: any Mind Layer
client works the same way, with nothing changed but the URL.
``MIND_LAYER_TOKEN`` is sent as the owner token when set.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from typing import Any

BASE = (sys.argv[1] if len(sys.argv) > 1 else os.environ.get("MIND_LAYER_URL", "")).rstrip(
    "/"
) or "http://127.0.0.1:8080"
SCOPE = {"agent": "assistant", "user": "synthetic-user"}


def call(method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """One JSON request; the decoded answer."""
    headers = {"Content-Type": "application/json"}
    token = os.environ.get("MIND_LAYER_TOKEN")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(BASE + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)
    except urllib.error.HTTPError as e:  # the server's {"error", "message"}, in one line
        try:
            said = json.load(e).get("message", "")
        except (ValueError, AttributeError):
            said = ""
        hint = " (set MIND_LAYER_TOKEN to the owner token)" if e.code == 401 else ""
        sys.exit(f"{method} {path}: {e.code} {said or e.reason}{hint}")
    except urllib.error.URLError as e:  # nothing listening there: the server is not started
        sys.exit(
            f"cannot reach {BASE} ({e.reason}): start the server first, "
            "memstore serve --api mindlayer --data data/"
        )


def main() -> None:
    memory = call(
        "POST",
        "/v1/memories",
        {
            "scope": SCOPE,
            "id": "diet",
            "text": "The user is vegetarian and cooks dinner for two people.",
            "session": "first-conversation",
        },
    )
    print(f"stored {memory['id']}: {memory['text']}")
    hits = call("POST", "/v1/search", {"scope": SCOPE, "query": "vegetarian dinner"})
    for hit in hits:
        print(f"found {hit['memory']['id']} (score {hit['score']:.2f}): {hit['memory']['text']}")
    call("PUT", "/v1/personality", {"scope": SCOPE, "personality": "Be warm and practical."})
    context = call("POST", "/v1/context", {"scope": SCOPE, "query": "What should I cook tonight?"})
    print("context for the prompt:")
    print(context["prompt"])


if __name__ == "__main__":
    main()
