// Preload (`node --import ./loopback.mjs server.js`) for third-party servers that
// bind every interface and print no usable port: it pins every listen() without a
// host to 127.0.0.1 and prints `READY <port>` on stdout once bound, so a test can
// pass PORT=0 and read the real port, as with the Python peers.
import net from "node:net";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const first = args[0];
  if (first !== null && typeof first === "object" && !Array.isArray(first)) {
    if (first.path === undefined && !first.host) args[0] = { ...first, host: "127.0.0.1" };
  } else if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) {
    if (typeof args[1] !== "string") args.splice(1, 0, "127.0.0.1");
  }
  this.once("listening", () => {
    const addr = this.address();
    if (addr && typeof addr === "object") process.stdout.write(`READY ${addr.port}\n`);
  });
  return listen.apply(this, args);
};
