/** Environment of the service, read once. Every setting has an embedded default. */
import { resolve } from 'node:path';
import { projectRoot } from './tools.js';

export interface ServiceConfig {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  temporalAddress: string | undefined;
  temporalNamespace: string;
  /**
   * What the embedded Temporal stores its state in when TEMPORAL_ADDRESS is unset: the CLI's dev
   * server on SQLite (the default), or the Temporal server built from source on the stack's Postgres.
   */
  temporalPersistence: 'sqlite' | 'postgres';
  taskQueue: string;
  rateLimitPerMinute: number;
  role: 'all' | 'api' | 'worker';
  logLevel: string;
  /** `ip:port` where the worker serves the Temporal SDK's own metrics (Prometheus text); unset, none. */
  workerMetricsAddress: string | undefined;
}

function intFrom(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a whole number, not "${raw}".`);
  return value;
}

function metricsAddress(raw: string | undefined): string | undefined {
  if (raw === undefined || raw === '') return undefined;
  // The SDK binds a socket address, not a name: an IPv4 address or a bracketed IPv6 one.
  const m = /^(\d{1,3}(?:\.\d{1,3}){3}|\[[\da-fA-F:.]+\]):(\d{1,5})$/.exec(raw);
  const port = Number(m?.[2]);
  if (!m || port < 1 || port > 65535) throw new Error(`TEMPORAL_WORKER_METRICS must be ip:port (127.0.0.1:9464), not "${raw}".`);
  return raw;
}

export function readConfig(env = process.env): ServiceConfig {
  const role = env.SERVICE_ROLE ?? 'all';
  if (role !== 'all' && role !== 'api' && role !== 'worker') throw new Error(`SERVICE_ROLE must be all, api or worker, not "${role}".`);
  const temporalPersistence = env.TEMPORAL_PERSISTENCE || 'sqlite';
  if (temporalPersistence !== 'sqlite' && temporalPersistence !== 'postgres') {
    throw new Error(`TEMPORAL_PERSISTENCE must be sqlite or postgres, not "${temporalPersistence}".`);
  }
  return {
    port: intFrom('PORT', 3000),
    host: env.HOST ?? '127.0.0.1',
    dataDir: resolve(projectRoot, env.DATA_DIR ?? '.data'),
    databaseUrl: env.DATABASE_URL || undefined,
    temporalAddress: env.TEMPORAL_ADDRESS || undefined,
    temporalNamespace: env.TEMPORAL_NAMESPACE ?? 'default',
    temporalPersistence,
    taskQueue: env.TEMPORAL_TASK_QUEUE ?? 'outreach',
    rateLimitPerMinute: intFrom('RATE_LIMIT_PER_MINUTE', 1200),
    role,
    logLevel: env.LOG_LEVEL ?? 'info',
    workerMetricsAddress: metricsAddress(env.TEMPORAL_WORKER_METRICS),
  };
}
