/**
 * Checks temporal-docker/ without a Docker engine: the compose file, after Compose-style variable
 * interpolation, must validate against the official Compose Specification JSON schema (vendored in
 * temporal-docker/compose-spec.schema.json, see temporal-docker/README.md), and must stay in step
 * with the service (search attributes, env vars, service wiring).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv2020, type ErrorObject } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { parse } from 'yaml';
import { describe, it, expect } from 'vitest';
import { searchAttributes } from '../../domain/shared/search-attributes.js';

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

const dir = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'temporal-docker');
const composeText = readFileSync(join(dir, 'docker-compose.yml'), 'utf8');

type Env = Record<string, string | undefined>;

/** Compose's interpolation of ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?err}, ${VAR?err}, $VAR and $$. */
function interpolate(value: unknown, env: Env): unknown {
  if (typeof value === 'string') {
    return value.replace(
      /\$\$|\$\{([A-Za-z_]\w*)(?:(:?)([-?])([^}]*))?\}|\$([A-Za-z_]\w*)/g,
      (match, name?: string, colon?: string, op?: string, arg?: string, bare?: string) => {
        if (match === '$$') return '$';
        const key = (name ?? bare)!;
        const current = env[key];
        const unset = current === undefined || (colon === ':' && current === '');
        if (op === '-' && unset) return arg!;
        if (op === '?' && unset) throw new Error(`required variable ${key} is missing: ${arg}`);
        return current ?? '';
      },
    );
  }
  if (Array.isArray(value)) return value.map((item) => interpolate(item, env));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolate(v, env)]));
  }
  return value;
}

interface Service {
  image?: string;
  build?: { context: string; dockerfile: string };
  depends_on?: string[] | Record<string, { condition: string }>;
  environment?: Record<string, string> | string[];
  entrypoint?: string | string[];
  command?: string | string[];
  volumes?: (string | { source?: string; target: string })[];
  deploy?: { replicas?: number };
  ports?: string[];
  ulimits?: Record<string, number | { soft: number; hard: number }>;
}
interface Compose {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
}

function load(text: string, env: Env = { AUTH_JWT_SECRET: 'test-secret' }): Compose {
  return interpolate(parse(text, { merge: true }), env) as Compose;
}

function validator() {
  const schema = JSON.parse(readFileSync(join(dir, 'compose-spec.schema.json'), 'utf8')) as object;
  // Draft 2020-12, as docker compose (compose-go) validates it; the schema uses union types.
  const ajv = new Ajv2020({ allErrors: true, allowUnionTypes: true, strictTypes: false });
  addFormats(ajv);
  return ajv.compile(schema);
}
const validate = validator();

function schemaErrors(doc: unknown): string[] {
  return validate(doc) ? [] : (validate.errors ?? []).map((e: ErrorObject) => `${e.instancePath} ${e.message}`);
}

function envOf(service: Service): Record<string, string> {
  const env = service.environment ?? {};
  if (!Array.isArray(env)) return env;
  return Object.fromEntries(env.map((entry) => [entry.split('=')[0]!, entry.slice(entry.indexOf('=') + 1)]));
}

function commandOf(service: Service): string {
  const parts = (v: string | string[] | undefined) => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
  return [...parts(service.entrypoint), ...parts(service.command)].join('\n');
}

const compose = load(composeText);
const services = compose.services;

describe('temporal-docker/docker-compose.yml', () => {
  it('validates against the Compose Specification schema', () => {
    expect(schemaErrors(compose)).toEqual([]);
  });

  it('is rejected by the schema when broken', () => {
    const unknownKey = load(composeText.replace('  temporal-ui:\n', '  temporal-ui:\n    imagee: typo\n'));
    expect(schemaErrors(unknownKey).join('\n')).toMatch(/additional properties/);
    const badCondition = load(composeText.replace('service_completed_successfully', 'service_done'));
    expect(schemaErrors(badCondition)).not.toEqual([]);
  });

  it('requires AUTH_JWT_SECRET', () => {
    expect(composeText).toMatch(/AUTH_JWT_SECRET: \$\{AUTH_JWT_SECRET:\?/);
    expect(() => load(composeText, {})).toThrow(/AUTH_JWT_SECRET/);
  });

  it('has the expected services', () => {
    for (const name of ['postgresql', 'temporal', 'temporal-setup', 'temporal-ui', 'api', 'gateway', 'worker']) {
      expect(services, name).toHaveProperty(name);
    }
    expect(services.postgresql!.image).toBe('postgres:16');
    expect(services.temporal!.image).toMatch(/^temporalio\/(server|auto-setup):/);
    expect(envOf(services.temporal!)).toMatchObject({ DB: 'postgres12', POSTGRES_SEEDS: 'postgresql' });
  });

  it('only depends on defined services', () => {
    for (const [name, service] of Object.entries(services)) {
      const deps = service.depends_on ?? [];
      for (const dep of Array.isArray(deps) ? deps : Object.keys(deps)) {
        expect(Object.keys(services), `${name} depends on ${dep}`).toContain(dep);
        expect(dep, `${name} depends on itself`).not.toBe(name);
      }
    }
  });

  it('registers exactly the search attributes of domain/search-attributes.ts', () => {
    const script = commandOf(services['temporal-setup']!);
    for (const [name, type] of Object.entries(searchAttributes)) {
      expect(script).toMatch(new RegExp(`--name ${name} --type ${type}\\b`));
    }
    const registered = [...script.matchAll(/--name (\w+) --type (\w+)/g)].map((m) => `${m[1]}:${m[2]}`);
    expect(registered.sort()).toEqual(
      Object.entries(searchAttributes)
        .map(([n, t]) => `${n}:${t}`)
        .sort(),
    );
    expect(script).toContain('temporal operator search-attribute create');
    expect(envOf(services['temporal-setup']!).TEMPORAL_ADDRESS).toBe('temporal:7233');
  });

  it('has setup scripts that parse as POSIX sh', () => {
    for (const name of ['temporal-setup', 'temporal-schema-setup']) {
      const service = services[name]!;
      expect(service.entrypoint).toEqual(['/bin/sh', '-ec']);
      // Throws (failing the test) on a syntax error.
      execFileSync('/bin/sh', ['-n', '-c', (service.command as string[])[0]!]);
    }
  });

  it('wires api and worker to Postgres and Temporal', () => {
    for (const role of ['api', 'worker']) {
      const service = services[role]!;
      expect(service.build).toEqual({ context: '..', dockerfile: 'temporal-docker/Dockerfile' });
      const env = envOf(service);
      expect(env.SERVICE_ROLE).toBe(role);
      expect(env.DATABASE_URL).toMatch(/^postgres:\/\/[^@]+@postgresql:5432\/outreach$/);
      expect(env.TEMPORAL_ADDRESS).toBe('temporal:7233');
      expect(env.AUTH_JWT_SECRET).toBe('test-secret');
      expect(env.PORT).toBe('3000');
      // A reader aborted at its heap limit leaves no core file behind (decision 051).
      expect(service.ulimits?.core).toBe(0);
    }
  });

  it('puts two API processes behind a gateway that never sends a request twice', () => {
    expect(services.api!.deploy?.replicas).toBeGreaterThanOrEqual(2);
    // One address for the replicas: only the gateway publishes the API's port.
    expect(services.api!.ports ?? []).toEqual([]);
    expect(services.gateway!.ports).toEqual(['127.0.0.1:3000:3000']);
    expect(services.gateway!.depends_on).toMatchObject({ api: { condition: 'service_healthy' } });
    const conf = readFileSync(join(dir, 'nginx', 'api.conf'), 'utf8');
    const mounts = (services.gateway!.volumes ?? []).map((v) =>
      typeof v === 'string' ? v : `${v.source}:${v.target}`,
    );
    expect(mounts.join()).toContain('./nginx/api.conf:/etc/nginx/conf.d/default.conf');
    expect(conf).toMatch(/^\s*proxy_pass \$api;/m);
    expect(conf).toMatch(/set \$api http:\/\/api:3000;/);
    // Only a refused or failed connection moves a request on; non_idempotent would resend a POST.
    expect(conf).toMatch(/^\s*proxy_next_upstream error;/m);
    expect(conf).not.toMatch(/non_idempotent/);
    expect(conf).toMatch(/^\s*proxy_buffering off;/m);
  });

  it('points the UI at the temporal service', () => {
    const ui = services['temporal-ui']!;
    expect(ui.image).toMatch(/^temporalio\/ui:/);
    expect(envOf(ui).TEMPORAL_ADDRESS).toBe('temporal:7233');
  });

  it('mounts the dynamic config and the postgres init scripts', () => {
    const mounts = (s: Service) =>
      (s.volumes ?? []).map((v) => (typeof v === 'string' ? v : `${v.source}:${v.target}`));
    expect(mounts(services.temporal!).join()).toContain('./dynamicconfig:/etc/temporal/config/dynamicconfig');
    expect(envOf(services.temporal!).DYNAMIC_CONFIG_FILE_PATH).toBe('config/dynamicconfig/development-sql.yaml');
    readFileSync(join(dir, 'dynamicconfig', 'development-sql.yaml'), 'utf8');
    expect(mounts(services.postgresql!).join()).toContain('./postgres-init:/docker-entrypoint-initdb.d');
    expect(readFileSync(join(dir, 'postgres-init', '01-outreach.sh'), 'utf8')).toMatch(/CREATE DATABASE outreach/);
  });
});
