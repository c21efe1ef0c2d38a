/** The cloud-drive connection's API shapes (decision 036). Tokens have no field here: no answer carries one. */
import { z } from 'zod';
import { TimestampSchema, lineSchema } from '../shared/common.js';

export const CloudDriveStatusSchema = z
  .enum(['connected', 'reconnect_required'])
  .describe('`reconnect_required`: the grant was revoked or expired; connect again');

export const CloudDriveStateSchema = z
  .object({
    connected: z.boolean().describe('A drive account is connected (it may still need reconnecting: see `status`)'),
    account_email: z.string().nullable(),
    scopes: z.array(z.string()),
    connected_at: TimestampSchema.nullable(),
    status: CloudDriveStatusSchema.nullable(),
    last_error: z
      .string()
      .nullable()
      .describe('What last went wrong with the connection, in words a person can act on'),
  })
  .describe("The workspace's cloud-drive connection; never its tokens");
export type CloudDriveState = z.infer<typeof CloudDriveStateSchema>;

export const CloudDriveConnectAnswerSchema = z.object({
  authorize_url: z
    .url()
    .describe('Where to send the person to consent; the drive returns to the callback with `code` and `state`'),
  expires_at: TimestampSchema.describe('The authorization must complete before this'),
});

// Bounded so the longest query a schema accepts, every character percent-encoded as four UTF-8
// bytes (12 characters each), stays under the server's 64 KiB header limit: past that Node
// answers an undocumented 431 before any schema sees the request (the fuzz run found it).
export const CloudDriveCallbackQuerySchema = z.object({
  code: lineSchema(1, 2048).optional(),
  state: lineSchema(1, 256).optional(),
  error: lineSchema(0, 256).optional().describe('Set by the drive when the person refused (access_denied)'),
  scope: lineSchema(0, 1024).optional(),
});

export const CloudDriveCallbackAnswerSchema = z.object({
  detail: z.string(),
  connected: z.literal(true),
  account_email: z.string().nullable(),
});

/** A drive file's id (the interface spec's Limits, `file_ids`). */
export const DriveFileIdSchema = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[A-Za-z0-9_-]+$/);

/** How long a pending authorization lasts. */
export const cloudDriveAuthorizationMinutes = 10;
