"""The fastmcp proxy as an ASGI app, for `uvicorn --factory --workers N`.

The same proxy `fastmcp run URL` builds (`create_proxy(URL)`: a fresh backend
client per request, mirroring the front request's era), served the way
fastmcp's HTTP deployment guide recommends when more than one worker process
is wanted (`fastmcp run` serves one process only, so on a 2-core machine it
could use half the CPU Junction may use). Stateless, as that guide asks for
several workers behind one port: no handshake-era session is pinned to a
worker. Run by benches/peers/run.sh with FASTMCP_PROXY_TARGET set.
"""

import os

from fastmcp.server import create_proxy


def app():
    return create_proxy(os.environ["FASTMCP_PROXY_TARGET"]).http_app(stateless_http=True)
