#!/usr/bin/env python3
"""A TCP relay that counts the bytes clients send upstream.

tcp_count.py LISTEN_PORT UPSTREAM_PORT COUNT_FILE
COUNT_FILE holds the running total (bytes from clients to the upstream,
request lines, headers and bodies), rewritten atomically after each read.
The store tests put it between s3fs and the S3 server to measure what a
profile uploads."""
import asyncio
import os
import sys

listen, upstream, count_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
total = 0


def publish():
    tmp = count_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % total)
    os.replace(tmp, count_file)


async def pipe(reader, writer, counted):
    global total
    try:
        while True:
            data = await reader.read(1 << 16)
            if not data:
                break
            if counted:
                total += len(data)
                publish()
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def serve(cr, cw):
    try:
        ur, uw = await asyncio.open_connection("127.0.0.1", upstream)
    except OSError:
        cw.close()
        return
    await asyncio.gather(pipe(cr, uw, True), pipe(ur, cw, False))


async def main():
    publish()
    server = await asyncio.start_server(serve, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


asyncio.run(main())
