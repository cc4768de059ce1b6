#!/usr/bin/env python3
"""Writes the binary seed inputs of tests/fuzz/corpus/ (valid ids, hellos, headers, handles) from the wire
layouts of core/src/bootstrap/wire.h and plugins/net-socket/wire.h. Text seeds are kept as files."""
import os
import socket
import struct
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(root, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def sockaddr_in(port, ip="127.0.0.1"):  # SocketAddress / SockAddr: 28 bytes, family in host order
    return struct.pack("<H", socket.AF_INET) + struct.pack(">H", port) + socket.inet_aton(ip) + bytes(8 + 12)


def sockaddr_in6(port):
    return struct.pack("<H", socket.AF_INET6) + struct.pack(">H", port) + bytes(4) + socket.inet_pton(
        socket.AF_INET6, "::1") + bytes(4)


MAGIC = 0x1122334455667788
# ---- bootstrap (selector 0 id, 1 hello, 2 headers, 3 reply)
uid = struct.pack("<QII", MAGIC, 0x54540001, 0) + sockaddr_in(29500)
put("bootstrap_wire", "id_v4", b"\x00" + uid + bytes(128 - len(uid)))
uid6 = struct.pack("<QII", MAGIC, 0x54540001, 1) + sockaddr_in6(29500)
put("bootstrap_wire", "id_v6_rank0", b"\x00" + uid6 + bytes(128 - len(uid6)))


def hello(rank, n, known):
    return b"\x01" + struct.pack("<QI", MAGIC, known) + struct.pack("<QII", MAGIC, rank, n) + sockaddr_in(40000) + bytes(4)


put("bootstrap_wire", "hello_first", hello(0, 4, 0))
put("bootstrap_wire", "hello_known", hello(3, 4, 4))
put("bootstrap_wire", "hello_out_of_range", hello(4, 4, 4))


def hdr(rank, kind, nbytes, tag=0):
    return struct.pack("<QIIiIQ", MAGIC, rank, kind, tag, 0, nbytes)


ROOT = 0xFFFFFFFF
put("bootstrap_wire", "headers_rank", b"\x02" + struct.pack("<QI", MAGIC, 4) + hdr(2, 1, 0) + hdr(2, 3, 64, 7) +
    hdr(2, 5, 28) + hdr(2, 6, 0))
put("bootstrap_wire", "headers_root", b"\x02" + struct.pack("<QI", MAGIC, 4) + hdr(ROOT, 1, 0) + hdr(ROOT, 2, 40))
put("bootstrap_wire", "reply_ok", b"\x03" + struct.pack("<iI", 0, 0) + sockaddr_in(40001) + bytes(4))
text = b"bootstrap: rank 4 is out of range for nRanks 4"
put("bootstrap_wire", "reply_error", b"\x03" + struct.pack("<iI", 5, len(text)) + bytes(32) + text)

# ---- net-socket (selector 0 handle, 1 hellos, 2 headers)
NS_MAGIC = 0x0102030405060708
handle = struct.pack("<IHHQ", 0x4B535454, 1, 0, NS_MAGIC) + sockaddr_in(41000) + struct.pack("<IIIQ", 4, 2, 0, 0)
put("net_socket_wire", "handle_4x2", b"\x00" + handle + bytes(128 - len(handle)))
handle0 = struct.pack("<IHHQ", 0x4B535454, 1, 0, NS_MAGIC) + sockaddr_in6(41000) + struct.pack("<IIIQ", 0, 0, 0, 0)
put("net_socket_wire", "handle_v6_ctrl_only", b"\x00" + handle0 + bytes(128 - len(handle0)))


def ns_hello(index, n, t):
    return struct.pack("<IHHQQIIII", 0x4C485454, 1, 0, NS_MAGIC, 99, index, n, t, 0)


put("net_socket_wire", "hellos", b"\x01" + struct.pack("<QII", NS_MAGIC, 4, 2) +
    b"".join(ns_hello(i, 4, 2) for i in range(5)))


def msg(flags, size, chunk):
    return struct.pack("<IIQQ", 0x474D5454, flags, size, chunk)


put("net_socket_wire", "headers", b"\x02" + struct.pack("<BQ", 4, 1 << 20) + msg(1, 100, 0) + msg(0, 1 << 20, 1 << 18) +
    msg(0, 1000, 256))
