/**
 * Local servers that speak the protocols the enrichment providers use: HTTP for the page reader,
 * the OpenAI chat-completions protocol for the AI column, and DNS (UDP) for MX lookups. They
 * record what they were asked, so tests check the request as well as the answer.
 */
import { createSocket } from 'node:dgram';
import { serveHttp } from '../../sim/local-http.js';

/** A chat-completions endpoint (POST /v1/chat/completions) answering with what `answer` gives for the request body. */
export function serveChatCompletions(
  answer: (body: { model: string; messages: { role: string; content: string }[] }) => {
    status?: number;
    content?: string | null;
  },
) {
  return serveHttp((req, res, body) => {
    res.setHeader('content-type', 'application/json');
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      res.statusCode = 404;
      return void res.end(JSON.stringify({ error: { message: 'Not found', type: 'invalid_request_error' } }));
    }
    const request = JSON.parse(body) as { model: string; messages: { role: string; content: string }[] };
    const reply = answer(request);
    if (reply.status && reply.status !== 200) {
      res.statusCode = reply.status;
      return void res.end(JSON.stringify({ error: { message: `local error ${reply.status}`, type: 'server_error' } }));
    }
    res.end(
      JSON.stringify({
        id: 'chatcmpl-local',
        object: 'chat.completion',
        created: 1_700_000_000,
        model: request.model,
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content: reply.content ?? null },
            finish_reason: 'stop',
            logprobs: null,
          },
        ],
        usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
      }),
    );
  });
}

/**
 * A DNS server over UDP answering MX queries from `zones` (domain -> records); any other name is
 * NXDOMAIN, a domain mapped to null answers with no records (NODATA).
 */
export async function serveDns(zones: Record<string, { priority: number; exchange: string }[] | null>) {
  const socket = createSocket('udp4');
  const queries: string[] = [];
  const encodeName = (name: string) =>
    Buffer.concat([
      ...name
        .split('.')
        .filter(Boolean)
        .map((label) => Buffer.concat([Buffer.from([label.length]), Buffer.from(label, 'ascii')])),
      Buffer.from([0]),
    ]);
  socket.on('message', (message, peer) => {
    // Question: the name's labels from byte 12, then type and class.
    const labels: string[] = [];
    let at = 12;
    while (message[at]! > 0) {
      labels.push(message.subarray(at + 1, at + 1 + message[at]!).toString('ascii'));
      at += 1 + message[at]!;
    }
    const questionEnd = at + 5;
    const name = labels.join('.').toLowerCase();
    queries.push(name);
    const known = Object.hasOwn(zones, name);
    const records = (known && zones[name]) || [];
    const answers = records.map((r) => {
      const exchange = encodeName(r.exchange);
      const rdata = Buffer.concat([Buffer.from([r.priority >> 8, r.priority & 0xff]), exchange]);
      const head = Buffer.alloc(12);
      head.writeUInt16BE(0xc00c, 0); // the question's name
      head.writeUInt16BE(15, 2); // MX
      head.writeUInt16BE(1, 4); // IN
      head.writeUInt32BE(60, 6);
      head.writeUInt16BE(rdata.length, 10);
      return Buffer.concat([head, rdata]);
    });
    const header = Buffer.alloc(12);
    message.copy(header, 0, 0, 2);
    header.writeUInt16BE(known ? 0x8180 : 0x8183, 2); // a response; NXDOMAIN for unknown names
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
