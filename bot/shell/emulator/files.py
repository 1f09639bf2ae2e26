"""Files, the way files.upload's v2 flow goes: files.getUploadURLExternal hands out an upload
URL, the client posts the bytes there, files.completeUploadExternal shares them (a message
carrying the files in each channel). Also files.info."""

from __future__ import annotations

import copy
import mimetypes
import time
from typing import Any

from aiohttp import web

from bot.render import limits
from bot.shell.emulator.errors import SlackError, invalid_arguments
from bot.shell.emulator.params import required
from bot.shell.emulator.server import Server
from bot.shell.emulator.web_api import MethodTable
from bot.shell.emulator.workspace import TEAM_DOMAIN, Channel, Workspace


class FileMethods:
    def __init__(self, ws: Workspace, server: Server) -> None:
        self.ws = ws
        self.server = server
        self._pending: dict[str, dict[str, Any]] = {}  # file id -> what getUploadURL was told

    def table(self) -> MethodTable:
        return {
            "files.getUploadURLExternal": (self.get_upload_url, "bot"),
            "files.completeUploadExternal": (self.complete_upload, "bot"),
            "files.info": (self.info, "bot"),
        }

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/upload/v1/{file_id}", self.handle_upload)]

    def get_upload_url(self, args: dict[str, Any]) -> dict[str, Any]:
        required(args, "filename", "length")
        try:
            length = int(args["length"])
        except (TypeError, ValueError):
            raise invalid_arguments("length must be an integer") from None
        if length < 0:
            raise invalid_arguments("length must be positive")
        file_id = self.ws.next_id("F")
        self._pending[file_id] = {
            "filename": str(args["filename"]),
            "length": length,
            "alt_txt": args.get("alt_txt"),
            "snippet_type": args.get("snippet_type"),
            "uploaded": False,
            "completed": False,
        }
        return {"upload_url": f"{self.server.base_url}/upload/v1/{file_id}", "file_id": file_id}

    async def handle_upload(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        pending = self._pending.get(file_id)
        if pending is None or pending["completed"]:
            return web.Response(status=404, text="file_not_found", content_type="text/plain")
        data: bytes | None = None
        if request.content_type == "multipart/form-data":
            reader = await request.multipart()
            async for part in reader:
                if part is not None and getattr(part, "name", None) is not None:
                    chunk = await part.read(decode=True)  # type: ignore[union-attr]
                    if data is None or getattr(part, "filename", None):
                        data = bytes(chunk)
                    if getattr(part, "filename", None):
                        break
        else:
            data = await request.read()
        self.ws.uploads[file_id] = data or b""
        pending["uploaded"] = True
        size = len(self.ws.uploads[file_id])
        return web.Response(text=f"OK - {size}", content_type="text/plain")

    def complete_upload(self, args: dict[str, Any]) -> dict[str, Any]:
        ws = self.ws
        required(args, "files")
        items = args["files"]
        if not isinstance(items, list) or not items:
            raise invalid_arguments("files must be a non-empty array")
        for item in items:
            if not isinstance(item, dict) or "id" not in item:
                raise invalid_arguments("each file needs an id")
            pending = self._pending.get(str(item["id"]))
            if pending is None or not pending["uploaded"] or pending["completed"]:
                raise SlackError("file_not_found")
        channels: list[Channel] = []
        if args.get("channel_id"):
            channels.append(ws.writable(args["channel_id"]))
        if args.get("channels"):
            channels.extend(ws.writable(c.strip()) for c in str(args["channels"]).split(","))
        thread_ts = args.get("thread_ts")
        if thread_ts and not channels:
            raise invalid_arguments("thread_ts requires channel_id")
        parents = [ws.thread_parent(ch.id, str(thread_ts)) for ch in channels if thread_ts]
        initial_comment = args.get("initial_comment")
        if initial_comment and len(str(initial_comment)) > limits.MAX_MESSAGE_TEXT:
            raise SlackError("msg_too_long")
        files = [self._share(str(item["id"]), item, channels) for item in items]
        for i, ch in enumerate(channels):
            msg = ws.new_bot_message(str(initial_comment) if initial_comment else "", None, None)
            msg["files"] = copy.deepcopy(files)
            msg["upload"] = True
            if thread_ts:
                msg["thread_ts"] = parents[i]
            ws.store_message(ch.id, msg)
        return {"files": [{"id": f["id"], "title": f["title"]} for f in files]}

    def _share(self, fid: str, item: dict[str, Any], channels: list[Channel]) -> dict[str, Any]:
        """The file object of an uploaded file, completed and kept for files.info."""
        ws = self.ws
        pending = self._pending[fid]
        pending["completed"] = True
        name = pending["filename"]
        data = ws.uploads.get(fid, b"")
        mimetype = mimetypes.guess_type(name)[0] or "application/octet-stream"
        info = {
            "id": fid,
            "created": int(time.time()),
            "timestamp": int(time.time()),
            "name": name,
            "title": item.get("title") or name,
            "mimetype": mimetype,
            "filetype": name.rsplit(".", 1)[-1].lower() if "." in name else "binary",
            "user": ws.bot_user_id,
            "size": len(data),
            "alt_txt": pending["alt_txt"],
            "url_private": f"{self.server.base_url}/files-pri/{ws.team_id}-{fid}/{name}",
            "permalink": f"https://{TEAM_DOMAIN}.slack.com/files/{ws.bot_user_id}/{fid}/{name}",
            "channels": [ch.id for ch in channels],
        }
        ws.files[fid] = info
        return info

    def info(self, args: dict[str, Any]) -> dict[str, Any]:
        required(args, "file")
        info = self.ws.files.get(str(args["file"]))
        if info is None:
            raise SlackError("file_not_found")
        return {"file": copy.deepcopy(info)}
