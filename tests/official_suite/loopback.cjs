// Loaded with `node --require` into the conformance runner so that its mock servers serve the
// loopback interface only:
//  - a listen() that names no host and passes a callback binds 127.0.0.1 (a listen() without a
//    callback is left alone: its caller may read server.address() synchronously, which only works
//    for the default bind);
//  - every server drops connections whose peer is not a loopback address.
'use strict';
const net = require('net');

const originalListen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[args.length - 1] === 'function') {
    const first = args[0];
    if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
      if (typeof args[1] !== 'string') args.splice(1, 0, '127.0.0.1');
    } else if (first && typeof first === 'object' && first.host === undefined && first.path === undefined &&
               first.fd === undefined && first.handle === undefined && first._handle === undefined) {
      args[0] = Object.assign({}, first, { host: '127.0.0.1' });
    } else if (typeof first === 'function') {
      args.unshift(0, '127.0.0.1');
    }
  }
  return originalListen.apply(this, args);
};

const originalEmit = net.Server.prototype.emit;
net.Server.prototype.emit = function (event, socket, ...rest) {
  if (event === 'connection' && socket && socket.remoteAddress) {
    const addr = socket.remoteAddress;
    if (!(addr === '::1' || addr.startsWith('127.') || addr.startsWith('::ffff:127.'))) {
      socket.destroy();
      return false;
    }
  }
  return originalEmit.call(this, event, socket, ...rest);
};
