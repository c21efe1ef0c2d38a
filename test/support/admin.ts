/** The operator's command line as an operator runs it (`npm run admin -- ...`), for the tests. */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { projectRoot } from '../../worker/tools.js';

const run = promisify(execFile);

export interface AdminRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs one admin command with `env` over this process's environment; a non-zero exit is answered, not thrown. */
export async function runAdmin(args: string[], env: NodeJS.ProcessEnv): Promise<AdminRun> {
  try {
    const { stdout, stderr } = await run('npm', ['run', '--silent', 'admin', '--', ...args], {
      cwd: projectRoot,
      env: { ...process.env, ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}
