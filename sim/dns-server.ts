/**
 * A local DNS server over UDP answering A, AAAA and CNAME queries from `zones` (name -> records);
 * a name it does not know is NXDOMAIN, a known name without records of the asked type is NODATA.
 * `failing` names answer SERVFAIL. For subdomain discovery's tests and benchmark.
 */
import { createSocket } from 'node:dgram';
import { isIPv6 } from 'node:net';

export interface HostRecords {
  a?: string[];
  aaaa?: string[];
  cname?: string;
}

function encodeName(name: string): Buffer {
  return Buffer.concat([
    ...name
      .split('.')
      .filter(Boolean)
      .map((label) => Buffer.concat([Buffer.from([label.length]), Buffer.from(label, 'ascii')])),
    Buffer.from([0]),
  ]);
}

function ipv6Bytes(address: string): Buffer {
  const [head, tail] = address.split('::') as [string, string | undefined];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g || '0', 16), i * 2));
  return out;
}

export async function serveDnsZones(zones: Record<string, HostRecords>, options: { failing?: Set<string> } = {}) {
  const socket = createSocket('udp4');
  const queries: { name: string; type: number }[] = [];
  socket.on('message', (message, peer) => {
    const labels: string[] = [];
    let at = 12;
    while (message[at]! > 0) {
      labels.push(message.subarray(at + 1, at + 1 + message[at]!).toString('ascii'));
      at += 1 + message[at]!;
    }
    const type = message.readUInt16BE(at + 1);
    const questionEnd = at + 5;
    const name = labels.join('.').toLowerCase();
    queries.push({ name, type });
    const zone = zones[name];
    const answers: Buffer[] = [];
    const record = (rtype: number, rdata: Buffer) => {
      const head = Buffer.alloc(12);
      head.writeUInt16BE(0xc00c, 0);
      head.writeUInt16BE(rtype, 2);
      head.writeUInt16BE(1, 4);
      head.writeUInt32BE(60, 6);
      head.writeUInt16BE(rdata.length, 10);
      answers.push(Buffer.concat([head, rdata]));
    };
    if (zone) {
      if (type === 1) for (const a of zone.a ?? []) record(1, Buffer.from(a.split('.').map(Number)));
      if (type === 28) for (const a of zone.aaaa ?? []) if (isIPv6(a)) record(28, ipv6Bytes(a));
      if (type === 5 && zone.cname) record(5, encodeName(zone.cname));
    }
    const header = Buffer.alloc(12);
    message.copy(header, 0, 0, 2);
    const rcode = options.failing?.has(name) ? 2 : zone ? 0 : 3;
    header.writeUInt16BE(0x8180 | rcode, 2);
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(answers.length, 6);
    socket.send(Buffer.concat([header, message.subarray(12, questionEnd), ...answers]), peer.port, peer.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const { port } = socket.address();
  return {
    server: `127.0.0.1:${port}`,
    queries,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}
