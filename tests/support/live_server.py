"""Serve an ASGI app on a free 127.0.0.1 port in a background thread (browser tests and the
screenshot script), with the same uvicorn server `gamut-local view` uses."""

from __future__ import annotations

import contextlib
import threading
import time


@contextlib.contextmanager
def live_server(app, timeout: float = 20.0):
    """Yield the base URL (http://127.0.0.1:PORT) while the app is served."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the viewer did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


@contextlib.contextmanager
def chromium():
    """Debian's Chromium, headless, through Playwright (never a browser Playwright downloads)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()
