"""The emulator's HTTP server: one aiohttp app on 127.0.0.1 and a free port, with the routes
the emulator's parts serve."""

from __future__ import annotations

from aiohttp import web

# Uploads through files.upload's v2 flow may be large.
_MAX_BODY = 64 * 1024 * 1024


class Server:
    def __init__(self) -> None:
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    async def start(self, routes: list[web.RouteDef]) -> None:
        if self._runner is not None:
            raise RuntimeError("emulator already started")
        app = web.Application(client_max_size=_MAX_BODY)
        app.router.add_routes(routes)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("emulator not started: await emu.start() first")
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"
