/**
 * The metrics an operator (and bench:pnet) reads: the worker SDK's endpoint setting, the dev
 * server's metrics address, and the histogram arithmetic over two reads.
 */
import { Client, Connection } from '@temporalio/client';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { histogramChange, labelOf, scrape } from '../../bench/prometheus.js';
import { readConfig } from '../../worker/config.js';
import { startTemporalDevServer } from '../../worker/temporal-dev-server.js';

const histogram = (count: number, under10: number, sum: number) => `# TYPE request_latency histogram
request_latency_bucket{operation="Start",le="1"} 0
request_latency_bucket{operation="Start",le="10"} ${under10}
request_latency_bucket{operation="Start",le="+Inf"} ${count}
request_latency_sum{operation="Start"} ${sum}
request_latency_count{operation="Start"} ${count}
request_latency_bucket{operation="Poll",le="1"} 5
request_latency_bucket{operation="Poll",le="10"} 5
request_latency_bucket{operation="Poll",le="+Inf"} 5
request_latency_sum{operation="Poll"} 2
request_latency_count{operation="Poll"} 5
requests_total{operation="Start"} ${count}
`;

describe('histograms read from a metrics endpoint', () => {
  let server: Server;
  let url: string;
  let body = '';
  beforeAll(async () => {
    server = createServer((_req, res) => res.end(body));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('counts only the observations made between two reads, of the operation asked for', async () => {
    body = histogram(10, 8, 40);
    const before = await scrape(url);
    body = histogram(30, 12, 440);
    const after = await scrape(url);
    const start = histogramChange(
      before,
      after,
      'request_latency',
      (labels) => labelOf(labels, 'operation') === 'Start',
    );
    // 20 new observations summing 400: a mean of 20; only 4 of them under 10, so 90% fall under +Inf.
    expect(start).toEqual({ count: 20, sum: 400, mean: 20, p90Bound: Infinity });
    const poll = histogramChange(before, after, 'request_latency', (labels) => labelOf(labels, 'operation') === 'Poll');
    expect(poll.count).toBe(0);
    expect(poll.mean).toBeNaN();
    // A counter reads as its increase, per label set asked for.
    expect(
      histogramChange(before, after, 'requests_total', (labels) => labelOf(labels, 'operation') === 'Start').count,
    ).toBe(20);
  });

  it('reads an endpoint that does not answer as empty, not as an error', async () => {
    const closed = await scrape('http://127.0.0.1:1/metrics');
    expect(closed.size).toBe(0);
    expect(histogramChange(closed, closed, 'request_latency', () => true).count).toBe(0);
  });
});

describe('TEMPORAL_WORKER_METRICS', () => {
  it('is off unless set, and takes ip:port', () => {
    expect(readConfig({}).workerMetricsAddress).toBeUndefined();
    expect(readConfig({ TEMPORAL_WORKER_METRICS: '' }).workerMetricsAddress).toBeUndefined();
    expect(readConfig({ TEMPORAL_WORKER_METRICS: '127.0.0.1:9464' }).workerMetricsAddress).toBe('127.0.0.1:9464');
    expect(readConfig({ TEMPORAL_WORKER_METRICS: '[::1]:65535' }).workerMetricsAddress).toBe('[::1]:65535');
  });

  it('refuses anything but ip:port (the SDK binds an address, not a name), naming the variable', () => {
    for (const bad of [
      '9464',
      'http://127.0.0.1:9464',
      '127.0.0.1:',
      ':9464',
      'localhost:9464',
      '127.0.0.1:65536',
      '127.0.0.1:0',
    ]) {
      expect(() => readConfig({ TEMPORAL_WORKER_METRICS: bad })).toThrow(/TEMPORAL_WORKER_METRICS must be ip:port/);
    }
  });
});

describe("the dev server's metrics address", () => {
  it('serves persistence latency per operation where the handle says', async () => {
    const temporal = await startTemporalDevServer({ ui: false });
    const connection = await Connection.connect({ address: temporal.address });
    try {
      const before = await scrape(temporal.metricsUrl);
      await new Client({ connection }).workflow.start('metricsProbe', {
        taskQueue: 'metrics-probe',
        workflowId: 'metrics-probe',
      });
      const after = await scrape(temporal.metricsUrl);
      const created = histogramChange(
        before,
        after,
        'persistence_latency',
        (labels) => labelOf(labels, 'operation') === 'CreateWorkflowExecution',
      );
      expect(created.count).toBe(1);
      expect(created.mean).toBeGreaterThan(0);
    } finally {
      await connection.close();
      await temporal.stop();
    }
  });
});
