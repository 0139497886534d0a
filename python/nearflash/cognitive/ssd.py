"""``CognitiveSSD``: the DLG library over a device with the ``cognitive`` firmware extension. Every call is one or
more of the six vendor commands of the paper's Table 1 (``encode_command``), sent through the device's NVMe queue:
``deploy`` compiles on the host (int8 model, weight layout, instructions, K-NN graph pages) and sends two
``DLG_config``; ``hash`` / ``search`` / ``classify`` send ``DLG_hashing`` and then ``DLG_analysis`` or
``DLG_index`` on the same session."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from nearflash import _native
from nearflash.cognitive.data import load_model
from nearflash.cognitive.pipeline import LAYOUTS, DlgIndex, _images
from nearflash.cognitive.wire import encode_command
from nearflash.errors import InvalidArgument

#: Images per DLG_hashing command (one session each).
BATCH = 32
CONFIG_INSTRUCTIONS, CONFIG_MODEL = 0, 1
ANALYSIS_CLASS, ANALYSIS_CODES = 0, 1


class CognitiveSSD:
    """A Cognitive SSD: ``device`` (a :class:`nearflash.Device` created with ``ext_reserved_blocks`` > 0) with the
    ``cognitive`` extension attached (here, unless ``attach=False`` because it already is).

    ``method`` is the runtime's way of waiting for DLG-x: "B" (doorbell + polling, the default) or "A" (blocking).
    """

    def __init__(self, device: Any, *, method: str = "B", attach: bool = True, **params: Any) -> None:
        if method not in ("A", "B"):
            raise InvalidArgument(f"method: {method!r}; 'A' (blocking) or 'B' (doorbell + polling)")
        if not hasattr(device, "native") or not hasattr(device, "queue"):
            raise InvalidArgument(f"device: a nearflash.Device expected, got {type(device).__name__}")
        self.device = device
        if attach:
            device.attach("cognitive", method=method, **params)
        #: The I/O queue the DLG library's commands go through.
        self.queue = device.queue(depth=4)
        self.index: Optional[DlgIndex] = None
        self.layout: Optional[str] = None
        #: Device time (ns) of the last call's commands, from first submission to last completion, and per command.
        self.last_latency_ns = 0
        self.last_times: dict[str, int] = {}

    # --- the wire ----------------------------------------------------------------------------------------------
    def _command(self, name: str, address: int, dw12: int, data: np.ndarray, to_device: bool) -> int:
        sqe = encode_command(name, address, int(data.size), dw12)
        c = self.queue.command(sqe, data if to_device else None, out=None if to_device else data, what=name)
        self.last_times[name] = self.last_times.get(name, 0) + c.latency_ns
        return c.latency_ns

    @property
    def qid(self) -> int:
        """The id of :attr:`queue`."""
        return self.queue.qid

    def submit_hashing(self, images: Any, address: int = 0) -> int:
        """Submits one ``DLG_hashing`` of ``images`` without waiting (for load generators); returns its command id.
        Its completion is reaped on :attr:`queue` (``ssd.queue.reap()``)."""
        index = self._deployed()
        batch = np.ascontiguousarray(_images(images, index.model.input_bytes)).reshape(-1).copy()
        return self.queue.submit(encode_command("DLG_hashing", address, int(batch.size), index.bits), batch, what="DLG_hashing")

    # --- deployment --------------------------------------------------------------------------------------------
    def deploy(
        self,
        model: Any = None,
        database: Any = None,
        *,
        layout: str = "two_hop",
        k: int = 25,
        calibration: Any = 1000,
        seed: int = 1,
    ) -> int:
        """Compiles ``model`` (a hashing model, a safetensors path, or None for the shipped one) and the K-NN graph
        of ``database`` (uint8 images, (n, 784) or (n, 28, 28)) on the host and deploys both with ``DLG_config``.
        Returns the device time of the two commands (ns). A database that does not fit the reserved area is refused
        before anything is sent."""
        if layout not in LAYOUTS:
            raise InvalidArgument(f"layout: {layout!r}; one of {', '.join(LAYOUTS)}")
        if database is None:
            raise InvalidArgument("database: images to index are required")
        if model is None or isinstance(model, (str, bytes)) or hasattr(model, "__fspath__"):
            model = load_model(model)
        if not isinstance(model, _native.cognitive.Model):
            raise InvalidArgument(f"model: a nearflash.cognitive model or a path, got {type(model).__name__}")
        index = DlgIndex(database, model, calibration=calibration, k=k, seed=seed)
        self.last_times = {}
        m, i = _native.cognitive.compile_deployment(self.device.native, index.qmodel, model, index.graph, layout, seed)
        t = self._command("DLG_config", 0, CONFIG_MODEL, np.frombuffer(m, dtype=np.uint8).copy(), True)
        t += self._command("DLG_config", 0, CONFIG_INSTRUCTIONS, np.frombuffer(i, dtype=np.uint8).copy(), True)
        self.index, self.layout = index, layout
        self.last_latency_ns = t
        return t

    @property
    def deployment(self) -> Optional[str]:
        """The device's digest of its current deployment (CRC-32s of the two DLG_config payloads), None if none."""
        return self.report().get("deployment")

    def resume(self, model: Any, database: Any, codes: np.ndarray, digest: str, *, layout: str = "two_hop",
               k: int = 25, calibration: int = 1000, seed: int = 1) -> None:
        """Takes up a deployment the device already holds (it persists in the image) without sending DLG_config:
        the host side (int8 model, `codes` of `database` kept from when it was deployed) is rebuilt and checked
        against the device's `digest` and graph size. Raises `InvalidArgument` if the device holds another one."""
        if layout not in LAYOUTS:
            raise InvalidArgument(f"layout: {layout!r}; one of {', '.join(LAYOUTS)}")
        if model is None or isinstance(model, (str, bytes)) or hasattr(model, "__fspath__"):
            model = load_model(model)
        rep = self.report()
        if rep.get("deployment") != digest or rep.get("graph_deployed") != len(codes):
            raise InvalidArgument(f"digest: the device holds deployment {rep.get('deployment')} of "
                                  f"{rep.get('graph_deployed')} vertices, not {digest} of {len(codes)}")
        self.index = DlgIndex(database, model, calibration=calibration, k=k, seed=seed, codes=codes)
        self.layout = layout

    def _deployed(self) -> DlgIndex:
        if self.index is None:
            raise InvalidArgument("deploy(model, database) first: nothing is deployed on this device")
        return self.index

    # --- tasks -------------------------------------------------------------------------------------------------
    def _sessions(self, images: Any):
        """Yields (session address, batch) after DLG_hashing each batch; the address is the batch's offset, which
        also seeds the GSE's fallback draws as the host pipeline's query index does."""
        index = self._deployed()
        imgs = _images(images, index.model.input_bytes)
        self.last_latency_ns, self.last_times = 0, {}
        for off in range(0, len(imgs), BATCH):
            batch = np.ascontiguousarray(imgs[off : off + BATCH]).reshape(-1).copy()
            self.last_latency_ns += self._command("DLG_hashing", off, index.bits, batch, True)
            yield off, len(imgs[off : off + BATCH])

    def hash(self, images: Any) -> np.ndarray:
        """Hash codes (uint64) of ``images`` computed by DLG-x (``DLG_hashing`` + ``DLG_analysis`` codes)."""
        out = []
        for addr, n in self._sessions(images):
            buf = np.zeros(8 * n, dtype=np.uint8)
            self.last_latency_ns += self._command("DLG_analysis", addr, ANALYSIS_CODES, buf, False)
            out.append(buf.view(np.uint64))
        return np.concatenate(out)

    def classify(self, images: Any) -> np.ndarray:
        """Class of each image (``DLG_hashing`` + ``DLG_analysis`` 0: the classifier on the hash layer)."""
        out = []
        for addr, n in self._sessions(images):
            buf = np.zeros(n, dtype=np.uint8)
            self.last_latency_ns += self._command("DLG_analysis", addr, ANALYSIS_CLASS, buf, False)
            out.append(buf)
        return np.concatenate(out)

    def search(self, images: Any, t: int) -> np.ndarray:
        """Top-``t`` database ids per image, (n, t) uint32 (``DLG_hashing`` + ``DLG_index`` on the graph in
        flash)."""
        return self._search(images, t, codes=False)[0]

    def search_with_codes(self, images: Any, t: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`search`, and each image's hash code as DLG-x computed it (``DLG_analysis`` 1 on the same session,
        8 bytes per image): what a host needs to rank the answers of several devices by Hamming distance."""
        return self._search(images, t, codes=True)

    def _search(self, images: Any, t: int, codes: bool) -> tuple[np.ndarray, np.ndarray]:
        index = self._deployed()
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not 1 <= t <= len(index):
            raise InvalidArgument(f"T: {t!r}; an int from 1 to {len(index)} (the database size)")
        out, code_out = [], []
        for addr, n in self._sessions(images):
            if codes:
                buf = np.zeros(8 * n, dtype=np.uint8)
                self.last_latency_ns += self._command("DLG_analysis", addr, ANALYSIS_CODES, buf, False)
                code_out.append(buf.view(np.uint64))
            buf = np.zeros(4 * int(t) * n, dtype=np.uint8)
            self.last_latency_ns += self._command("DLG_index", addr, int(t), buf, False)
            out.append(buf.view(np.uint32).reshape(n, int(t)))
        return np.concatenate(out), (np.concatenate(code_out) if codes else np.empty(0, np.uint64))

    def report(self) -> dict[str, Any]:
        """The extension's counters (pages read from flash, NPE/GSE cycles, faults)."""
        return self.device.extension_report("cognitive")
