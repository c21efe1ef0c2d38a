/** The cloud drive in tests: files on its local twin (sim/drive-server.ts) and a workspace connected to it. */
import { expect } from 'vitest';
import type { DriveSim, DriveSimFile } from '../../sim/drive-server.js';
import { withKey, type TestStack } from './test-stack.js';

/** A file the account may see but not read (the twin answers 403), `secret_1`. */
export const forbiddenDriveFile: DriveSimFile = {
  id: 'secret_1',
  name: 'Board.pdf',
  mimeType: 'application/pdf',
  content: 'x',
  forbidden: true,
};

/** Puts `files` on the twin, each under its id. */
export function putDriveFiles(sim: DriveSim, ...files: DriveSimFile[]): void {
  for (const file of files) sim.files.set(file.id, file);
}

/** Connects the workspace of `apiKey` as a person does (connect, the twin's consent): the callback's answer. */
export async function connectDrive(stack: TestStack, sim: DriveSim, apiKey: string) {
  const started = await stack.app.inject({ method: 'POST', url: '/cloud-drive/connect/', headers: withKey(apiKey) });
  expect(started.statusCode).toBe(200);
  const back = await sim.consent(started.json().authorize_url);
  return stack.app.inject({ method: 'GET', url: `/cloud-drive/callback/${back.search}` });
}
