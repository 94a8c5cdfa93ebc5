#!/usr/bin/env python3
"""The other stress tests of the hang test's family, all at once on one directory
of the mount (scripts/hang-test.sh runs this under its watchdog):

- mmap writers of a shared file while another process truncates it (down and up,
  never below what the writers map, so no access faults);
- msync of a mapping while other processes write the same file with O_DIRECT;
- fsync of a file while another process writes it through a shared mapping;
- splice and copy_file_range between files of the mount;
- fork with a shared writable mapping, parent and child writing it.

Each worker also owns a region nobody else writes, fills it with a pattern of its
own, and checks it at the end (through a plain read after msync), so a lost or
misplaced write fails the test. Exit status 0 when every worker finished and every
check held; 1 otherwise (a hang is the watchdog's to catch).

Usage: stress.py DIR SECONDS
"""

import mmap
import os
import sys
import time

PAGE = 4096
SHARED = 1 << 20  # bytes of the shared file everyone maps
OWN = 64 << 10  # bytes each worker owns, after the shared part


def pattern(worker, round_):
    return bytes(((worker * 31 + round_ * 7 + i) & 0xFF) for i in range(PAGE))


def own_region(worker):
    return SHARED + worker * OWN


def check_own(path, worker, round_):
    """The worker's region holds its last round's pattern, page after page."""
    want = pattern(worker, round_)
    fd = os.open(path, os.O_RDONLY)
    try:
        for off in range(own_region(worker), own_region(worker) + OWN, PAGE):
            got = os.pread(fd, PAGE, off)
            if got != want:
                print(f"worker {worker}: {path} at {off} differs", file=sys.stderr)
                return False
    finally:
        os.close(fd)
    return True


def mmap_writer(path, worker, deadline):
    fd = os.open(path, os.O_RDWR)
    m = mmap.mmap(fd, SHARED + 8 * OWN)
    r = 0
    while time.time() < deadline:
        r += 1
        for off in range(0, SHARED, 64 * PAGE):
            m[off + worker * 8 : off + worker * 8 + 8] = r.to_bytes(8, "little")
        p = pattern(worker, r)
        for off in range(own_region(worker), own_region(worker) + OWN, PAGE):
            m[off : off + PAGE] = p
        m.flush()  # msync
    m.close()
    os.close(fd)
    return check_own(path, worker, r)


def truncator(path, deadline):
    fd = os.open(path, os.O_RDWR)
    keep = SHARED + 8 * OWN
    while time.time() < deadline:
        os.ftruncate(fd, keep + 3 * PAGE + 100)
        os.ftruncate(fd, keep)
    os.close(fd)
    return True


def direct_writer(path, worker, deadline):
    fd = os.open(path, os.O_RDWR | os.O_DIRECT)
    buf = mmap.mmap(-1, PAGE)  # page-aligned, as O_DIRECT wants
    r = 0
    while time.time() < deadline:
        r += 1
        buf[:] = pattern(worker, r)
        for k in range(0, SHARED, 16 * PAGE):
            os.pwrite(fd, buf, (k + worker * PAGE) % SHARED)
        os.pwrite(fd, buf, own_region(worker))
    os.close(fd)
    # Its own region is one page here; the rest of it stays as the file had it.
    fd = os.open(path, os.O_RDONLY)
    ok = os.pread(fd, PAGE, own_region(worker)) == pattern(worker, r)
    os.close(fd)
    return ok


def fsyncer(path, deadline):
    fd = os.open(path, os.O_RDWR)
    while time.time() < deadline:
        os.fsync(fd)
        os.fdatasync(fd)
    os.close(fd)
    return True


def copier(dirname, worker, deadline):
    src = os.path.join(dirname, f"src{worker}")
    dst = os.path.join(dirname, f"dst{worker}")
    data = bytes((worker + i) & 0xFF for i in range(256 << 10))
    with open(src, "wb") as f:
        f.write(data)
    ok = True
    while time.time() < deadline and ok:
        fi = os.open(src, os.O_RDONLY)
        fo = os.open(dst, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        left = len(data)
        while left:
            n = os.copy_file_range(fi, fo, left)
            if n == 0:
                raise OSError(f"copy_file_range copied nothing with {left} bytes left")
            left -= n
        os.lseek(fi, 0, 0)
        os.lseek(fo, 0, 0)
        r, w = os.pipe()
        moved = 0
        while moved < len(data):
            n = os.splice(fi, w, 65536)
            if n == 0:
                raise OSError(f"splice read nothing with {len(data) - moved} bytes left")
            while n:  # drain the pipe: a splice out may move less
                k = os.splice(r, fo, n)
                n -= k
                moved += k
        os.close(r)
        os.close(w)
        os.close(fi)
        os.close(fo)
        with open(dst, "rb") as f:
            ok = f.read() == data
    return ok


def forked_mapping(path, worker, deadline):
    fd = os.open(path, os.O_RDWR)
    m = mmap.mmap(fd, SHARED + 8 * OWN)
    pid = os.fork()
    r = 0
    mine = own_region(worker) + (OWN // 2 if pid == 0 else 0)
    while time.time() < deadline:
        r += 1
        m[mine : mine + PAGE] = pattern(worker, r)
        m.flush()
    if pid == 0:
        os._exit(0 if m[mine : mine + PAGE] == pattern(worker, r) else 1)
    _, status = os.waitpid(pid, 0)
    ok = status == 0 and m[mine : mine + PAGE] == pattern(worker, r)
    m.close()
    os.close(fd)
    return ok


def main():
    dirname, seconds = sys.argv[1], float(sys.argv[2])
    path = os.path.join(dirname, "stress")
    with open(path, "wb") as f:
        f.truncate(SHARED + 8 * OWN)
    deadline = time.time() + seconds
    jobs = [
        lambda: mmap_writer(path, 0, deadline),
        lambda: mmap_writer(path, 1, deadline),
        lambda: truncator(path, deadline),
        lambda: direct_writer(path, 2, deadline),
        lambda: direct_writer(path, 3, deadline),
        lambda: fsyncer(path, deadline),
        lambda: copier(dirname, 4, deadline),
        lambda: forked_mapping(path, 5, deadline),
    ]
    pids = []
    for job in jobs:
        pid = os.fork()
        if pid == 0:
            try:
                os._exit(0 if job() else 1)
            except Exception as e:  # an errno from the mount: a failure
                print(f"stress worker: {e!r}", file=sys.stderr)
                os._exit(1)
        pids.append(pid)
    failed = 0
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        failed += status != 0
    print(f"stress: {len(jobs) - failed} of {len(jobs)} workers finished and verified")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
