/**
 * Business-context documents linked from the cloud drive (interface spec: the drive link request of
 * AI business context documents, and Limits for `file_ids`), against the drive's local twin: one
 * document per file in the order picked, each read from the drive (a native document exported as
 * text, a file downloaded), an unreadable file failing its own document with the reason, and the
 * request's bounds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCloudDriveClient } from '../../integrations/cloud-drive/drive-client.js';
import { startDriveSim, driveSimConfig, type DriveSim } from '../../sim/drive-server.js';
import { connectDrive, forbiddenDriveFile, putDriveFiles } from '../support/cloud-drive.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack, paid } = useTestStack();
let sim: DriveSim;

beforeAll(async () => {
  sim = await startDriveSim();
  putDriveFiles(
    sim,
    {
      id: 'doc_1',
      name: 'Pricing',
      mimeType: 'application/vnd.google-apps.document',
      content: 'We sell the Gizmo Pro. It costs 40 EUR a seat each month. Teams of five or more get a discount.',
    },
    {
      id: 'md_1',
      name: 'About us.md',
      mimeType: 'text/markdown',
      content: Buffer.from(
        '# About us\n\nWe help sales teams find the right people. Our customers are software companies in Europe.',
      ),
    },
    forbiddenDriveFile,
  );
  stack.integrations.cloudDrive = createCloudDriveClient(driveSimConfig(sim));
  expect((await connectDrive(stack, sim, paid.apiKey)).statusCode).toBe(200);
});
afterAll(() => sim?.close());

const link = (fileIds: unknown, apiKey = paid.apiKey) =>
  stack.app.inject({
    method: 'POST',
    url: '/business-context/documents/drive/',
    headers: withKey(apiKey),
    payload: { file_ids: fileIds },
  });

interface Doc {
  id: string;
  source: string;
  status: string;
  title: string;
  error: string | null;
  drive_file_id: string;
  drive_web_view_link: string | null;
  summary: string | null;
}

async function settled(id: string): Promise<Doc> {
  for (let i = 0; i < 200; i += 1) {
    const doc = (
      await stack.app.inject({
        method: 'GET',
        url: `/business-context/documents/${id}/`,
        headers: withKey(paid.apiKey),
      })
    ).json<Doc>();
    if (doc.status === 'ready' || doc.status === 'failed') return doc;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`document ${id} never settled`);
}

describe('drive link', () => {
  it('adds one document per file in the order picked; unreadable files fail their own document with the reason', async () => {
    const res = await link(['md_1', 'secret_1', 'doc_1', 'missing_1']);
    expect(res.statusCode, res.body).toBe(202);
    const documents = res.json().documents as Doc[];
    expect(documents.map((d) => [d.drive_file_id, d.source, d.status])).toEqual([
      ['md_1', 'cloud_drive', 'pending'],
      ['secret_1', 'cloud_drive', 'pending'],
      ['doc_1', 'cloud_drive', 'pending'],
      ['missing_1', 'cloud_drive', 'pending'],
    ]);
    const [md, secret, doc, missing] = await Promise.all(documents.map((d) => settled(d.id)));
    expect(md).toMatchObject({
      status: 'ready',
      title: 'About us.md',
      drive_web_view_link: expect.stringContaining('md_1'),
    });
    expect(md!.summary).toContain('sales teams');
    expect(doc).toMatchObject({ status: 'ready', title: 'Pricing' });
    expect(doc!.summary).toContain('Gizmo Pro');
    expect(secret).toMatchObject({ status: 'failed', error: expect.stringMatching(/access|permission|forbidden/i) });
    expect(missing).toMatchObject({ status: 'failed', error: expect.stringMatching(/not found|no file/i) });
  });

  it('takes 1 to 25 ids of letters, digits, _ and -, and needs a connected drive', async () => {
    expect((await link([])).statusCode).toBe(422);
    expect((await link([...Array(26)].map((_, i) => `f${i}`))).statusCode).toBe(422);
    expect((await link(['bad id'])).statusCode).toBe(422);
    expect((await link(['x'.repeat(256)])).statusCode).toBe(422);
    const other = await stack.createWorkspace('paid');
    const notConnected = await link(['doc_1'], other.apiKey);
    expect(notConnected.statusCode).toBe(409);
    expect(notConnected.json().detail).toMatch(/connect/i);
  });
});
