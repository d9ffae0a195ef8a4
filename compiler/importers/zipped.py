"""A zip member's bytes, whether stored, deflated or zstd-compressed (method 93: inspect_ai's
`.eval` logs since 0.3.206), read without patching the standard `zipfile` module, so a plain
`wikitrace` process reads what inspect_ai writes without importing it."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

ZSTD = 93
"""The zip compression method number of Zstandard (APPNOTE 4.4.5)."""
_LOCAL_HEADER = 30
_CHUNK = 1024 * 1024


def read_member(archive: zipfile.ZipFile, name: str) -> bytes:
    """The member `name` of `archive`, decompressed. Raises what `ZipFile.read` raises for a
    damaged member (`zipfile.BadZipFile`, `KeyError`, ...), and `NotImplementedError` when a
    zstd member meets a Python without `zstandard` (install it: pip install zstandard)."""
    info = archive.getinfo(name)
    if info.compress_type != ZSTD or zipfile_reads_zstd():
        return archive.read(info)
    data = _decompress(_compressed(archive, info), info.file_size)
    if zlib.crc32(data) != info.CRC:
        raise zipfile.BadZipFile(f"bad CRC-32 for {name}")
    return data


def zipfile_reads_zstd() -> bool:
    """Whether the `zipfile` module reads zstd itself: Python 3.14, or patched by
    `zipfile_zstd` (which inspect_ai imports)."""
    return getattr(zipfile, "ZIP_ZSTANDARD", None) == ZSTD


def _compressed(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """The member's compressed bytes, after its local header (whose name and extra field may
    differ in length from the central directory's)."""
    if info.flag_bits & 0x1:
        raise RuntimeError(f"{info.filename} is encrypted")
    handle = archive.fp
    if handle is None:
        raise ValueError("the zip is closed")
    handle.seek(info.header_offset)
    header = handle.read(_LOCAL_HEADER)
    if len(header) != _LOCAL_HEADER or header[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"bad local file header for {info.filename}")
    name_length, extra_length = struct.unpack("<HH", header[26:30])
    handle.seek(info.header_offset + _LOCAL_HEADER + name_length + extra_length)
    data: bytes = handle.read(info.compress_size)
    if len(data) != info.compress_size:
        raise EOFError(f"{info.filename} is cut short")
    return data


def _decompress(data: bytes, size: int) -> bytes:
    """Every zstd frame of `data` (inspect writes several), no more than the `size` the zip
    declares: a member that would grow past it is damaged, not read on."""
    try:
        import zstandard
    except ImportError:
        raise NotImplementedError(
            "a zstd-compressed member and no zstandard module: pip install zstandard"
        ) from None
    out = bytearray()
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(
            io.BytesIO(data), read_across_frames=True
        )
        with reader:
            while len(out) <= size:
                chunk = reader.read(min(_CHUNK, size + 1 - len(out)))
                if not chunk:
                    break
                out += chunk
    except zstandard.ZstdError as error:
        raise zipfile.BadZipFile(f"damaged zstd data: {error}") from None
    if len(out) != size:
        raise zipfile.BadZipFile(f"{len(out)} bytes where the zip says {size}")
    return bytes(out)
