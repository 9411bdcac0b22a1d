"""Screenshots of the memory inspector's views, for docs/ui.md (written to docs/img/).

Starts ``memstore serve`` on a free loopback port over a temporary folder,
writes a few memories through MemoryProtocol (one of them updated, one with
markup in it), then drives Debian's Chromium (``/usr/bin/chromium``) with
Playwright through each view::

    .venv/bin/python scripts/ui_screenshots.py [--out docs/img]

Needs the dev and server extras and ``apt-get install chromium``; Playwright's
own browser download is never used.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import expect, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "screenshot-token"
EPISODE = "01J0000000000000000000000S"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _start(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    tokens = folder / "tokens.json"
    scopes = ["ingest", "recall", "forget", "admin"]  # the owner: the server's figures too
    tokens.write_text(json.dumps({TOKEN: {"tenant": "acme", "scopes": scopes}}))
    tokens.chmod(0o600)
    port = _free_port()
    cmd = [sys.executable, "-m", "memstore.cli", "serve", "--data", str(folder / "data")]
    cmd += ["--embedder", "hash", "--port", str(port), "--tokens-file", str(tokens)]
    log = open(folder / "serve.log", "wb")  # noqa: SIM115 - lives as long as the server
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ})
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"memstore serve did not start; see {folder / 'serve.log'}")


def _ingest(url: str, content: str, source: str, id: str | None = None) -> Any:
    body: dict[str, Any] = {"source": source, "content": content}
    if id:
        body["id"] = id
    r = httpx.post(f"{url}/v1/ingest", json=body, headers={"Authorization": f"Bearer {TOKEN}"})
    r.raise_for_status()
    return r.json()


def shoot(out: Path) -> list[Path]:
    """Write the screenshots into ``out``; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = _start(Path(tmp))
        try:
            first = _ingest(url, "# Travel\nBob moved to Lyon in March.", "bob.md", EPISODE)
            time.sleep(0.05)
            _ingest(url, "# Travel\nBob moved to Paris in June.", "bob.md", EPISODE)
            _ingest(url, "# Pets\nAlice adopted a tabby cat named Miso.", "alice.md")
            _ingest(url, "# Team\nThe platform team deploys on Tuesdays.", "team.md")
            _ingest(url, "<script>alert('memory')</script> is shown as text.", "markup.md")
            before = f"{first['lsn']['wall_ms']}.{first['lsn']['counter']}"
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True)
                page = browser.new_page(viewport={"width": 1360, "height": 860})
                page.goto(f"{url}/ui")

                def snap(name: str, full: bool = False) -> None:
                    path = out / f"ui-{name}.png"
                    page.screenshot(path=str(path), full_page=full)
                    written.append(path)

                snap("signin")
                page.get_by_role("textbox", name="Token").fill(TOKEN)
                page.get_by_role("button", name="Sign in").click()
                box = page.get_by_role("searchbox", name="Search memories")
                box.fill("Bob moved")
                box.press("Enter")
                hits = page.get_by_role("list", name="Results").get_by_role("listitem")
                expect(hits.first).to_contain_text("Bob")
                hits.first.get_by_text("Why this rank").click()
                snap("search")
                page.get_by_role("button", name="bob.md").click()
                expect(page.get_by_role("heading", name="History")).to_be_visible()
                snap("item", full=True)
                asof = page.get_by_role("textbox", name="As of")
                asof.fill(before)
                asof.press("Enter")
                expect(page.get_by_text("Time travel")).to_be_visible()
                snap("time-travel")
                page.get_by_role("button", name="Back to now").click()
                box.fill("")
                box.press("Enter")
                _ingest(url, "Dana joined the data team today.", "dana.md")
                live = page.get_by_role("region", name="Live changes")
                expect(live).to_contain_text("dana.md")
                stats = page.get_by_role("region", name="Statistics")
                stats.get_by_role("button", name="Refresh statistics").click()
                expect(stats.get_by_role("table", name="Items by partition")).to_contain_text("10")
                snap("live-and-stats")
                page.get_by_role("button", name="dana.md").first.click()
                page.get_by_role("region", name="Item").get_by_role("button", name="Forget").click()
                expect(page.get_by_role("dialog")).to_be_visible()
                snap("forget")
                browser.close()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args()
    for path in shoot(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
