#!/usr/bin/env python3
"""Checks the GPU code inside an installed libnccl.so.2: installs the build into a temporary prefix, then lists
the CUDA fat binaries of the installed library as `cuobjdump --list-elf` / `--list-ptx` would (and runs
cuobjdump too when the toolkit has it) and requires, for every kernel instance of the build, sm_80 and sm_90
machine code holding the kernel and compute_90 PTX, and the same for the one-sided operations' kernels.

usage: check_fatbin.py BUILD_DIR EXPECTED_INSTANCES
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX, KIND_ELF = 1, 2


def section(path, name):
    """Bytes of ELF section `name` of the shared object at `path` (64-bit little-endian ELF)."""
    data = open(path, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        sys.exit(f"{path}: not a 64-bit ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    def header(i):
        return struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
    strtab = header(shstrndx)
    for i in range(shnum):
        h = header(i)
        start = strtab[4] + h[0]
        if data[start:data.index(b"\0", start)].decode() == name:
            return data[h[4]:h[4] + h[5]]
    return None


def fatbin_entries(blob):
    """(kind, arch, payload) of every entry of every fat binary in a .nv_fatbin section."""
    entries, blobs, pos = [], 0, 0
    while pos + 16 <= len(blob):
        magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", blob, pos)
        if magic != FATBIN_MAGIC:
            pos += 8  # fat binaries are 8-byte aligned in the section
            continue
        blobs += 1
        entry, end = pos + header_size, pos + header_size + fat_size
        while entry < end:
            kind, _, entry_header, size = struct.unpack_from("<HHIQ", blob, entry)
            arch, = struct.unpack_from("<I", blob, entry + 28)
            entries.append((kind, arch, blob[entry + entry_header:entry + entry_header + size]))
            entry += entry_header + size
        pos = end
    return blobs, entries


def main():
    build, expected = sys.argv[1], int(sys.argv[2])
    prefix = tempfile.mkdtemp(prefix="tutti-install-")
    try:
        subprocess.run(["cmake", "--install", build, "--prefix", prefix], check=True, stdout=subprocess.DEVNULL)
        libs = [os.path.join(root, f) for root, _, files in os.walk(prefix) for f in files
                if f.startswith("libnccl.so") and not os.path.islink(os.path.join(root, f))]
        if len(libs) != 1:
            sys.exit(f"expected one installed libnccl.so.2 (a file, the rest links), found {libs}")
        lib = libs[0]
        blob = section(lib, ".nv_fatbin")
        if blob is None:
            sys.exit(f"{lib}: no .nv_fatbin section: the kernels were not linked in")
        blobs, entries = fatbin_entries(blob)
        print(f"{lib}: {blobs} fat binaries, {len(entries)} entries")
        for kind, arch, payload in entries:
            what = f"ELF sm_{arch}" if kind == KIND_ELF else f"PTX compute_{arch}" if kind == KIND_PTX else f"kind {kind}"
            print(f"  {what:18} {len(payload):9} bytes")
        elf80 = [p for k, a, p in entries if k == KIND_ELF and a == 80]
        elf90 = [p for k, a, p in entries if k == KIND_ELF and a == 90]
        ptx90 = [p for k, a, p in entries if k == KIND_PTX and a == 90]
        failures = []
        # One entry per collective kernel instance (tuttiKernel), plus one with the one-sided operations'
        # signal and wait kernels (rma/rma_kernels.cu). ELF entries name their kernels (PTX is compressed).
        for name, found in (("sm_80 ELF", elf80), ("sm_90 ELF", elf90), ("compute_90 PTX", ptx90)):
            if len(found) != expected + 1:
                failures.append(f"{name}: {len(found)} entries, want {expected + 1} (one per kernel instance and "
                                "the one-sided kernels)")
        for name, found in (("sm_80", elf80), ("sm_90", elf90)):
            colls = [p for p in found if b"tuttiKernel" in p]
            rma = [p for p in found if b"signalKernel" in p and b"waitKernel" in p]
            if len(colls) != expected:
                failures.append(f"{name} ELF: {len(colls)} entries hold tuttiKernel, want one per kernel instance "
                                f"({expected})")
            if len(rma) != 1:
                failures.append(f"{name} ELF: {len(rma)} entries hold the one-sided kernels, want 1")
        cuobjdump = shutil.which("cuobjdump") or "/usr/local/cuda/bin/cuobjdump"
        if os.access(cuobjdump, os.X_OK):
            listed = subprocess.run([cuobjdump, "--list-elf", lib], capture_output=True, text=True).stdout
            listed += subprocess.run([cuobjdump, "--list-ptx", lib], capture_output=True, text=True).stdout
            print(listed)
            for want in ("sm_80", "sm_90", "compute_90"):
                if want not in listed:
                    failures.append(f"cuobjdump lists no {want}")
        else:
            print("(no cuobjdump in this toolkit: the fat binaries were read directly)")
        if failures:
            sys.exit("FAIL: " + "; ".join(failures))
        print(f"OK: {expected} kernel instances and the one-sided kernels, each as sm_80 and sm_90 code and compute_90 PTX")
    finally:
        shutil.rmtree(prefix, ignore_errors=True)


if __name__ == "__main__":
    main()
