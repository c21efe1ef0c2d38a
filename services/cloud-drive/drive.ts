/**
 * The workspace's cloud-drive connection: connect (authorization code with PKCE), the callback,
 * the state, disconnect, and reading one file with the stored tokens (refreshed when expired).
 * Tokens are sealed before they reach the store and opened only here, for one call; no answer,
 * error or log line carries one.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Sql } from '../../db/sql.js';
import type { Integrations } from '../../integrations/config.js';
import {
  DriveError,
  nativeExportType,
  pkcePair,
  type CloudDriveClient,
  type TokenGrant,
} from '../../integrations/cloud-drive/drive-client.js';
import { SealedSecretError, seal, unseal, type Keyring } from '../../integrations/secrets/sealed.js';
import { ApiError } from '../../domain/shared/errors.js';
import {
  cloudDriveAuthorizationMinutes,
  DriveFileIdSchema,
  type CloudDriveState,
} from '../../domain/cloud-drive/cloud-drive.js';
import {
  createCloudDriveAuthorization,
  deleteCloudDriveConnection,
  markCloudDriveReconnectRequired,
  readCloudDriveConnection,
  saveCloudDriveConnection,
  storeRefreshedTokens,
  takeCloudDriveAuthorization,
  type CloudDriveConnectionRow,
} from '../../store/cloud-drive/connections.js';
import { secretsKeyring } from '../platform/sealing.js';

type DriveIntegrations = Pick<Integrations, 'cloudDrive' | 'secretsKeys'>;

const context = {
  access: (workspaceId: string) => `cloud_drive_connections.access_token:${workspaceId}`,
  refresh: (workspaceId: string) => `cloud_drive_connections.refresh_token:${workspaceId}`,
  verifier: (workspaceId: string) => `cloud_drive_authorizations.code_verifier:${workspaceId}`,
};

/** The drive's client, or 503 naming the variables to set. */
export function cloudDriveClientOf(integrations: Pick<Integrations, 'cloudDrive'>): CloudDriveClient {
  const drive = integrations.cloudDrive;
  if ('missing' in drive)
    throw new ApiError(
      'unavailable',
      `The cloud drive is not configured: set ${drive.missing.join(' and ')} (see the README's configuration table).`,
    );
  return drive;
}

const stateHashOf = (state: string) => createHash('sha256').update(state).digest();
const expiryOf = (grant: TokenGrant, now: number) =>
  grant.expiresIn !== undefined ? new Date(now + grant.expiresIn * 1000) : null;

export function toCloudDriveState(row: CloudDriveConnectionRow | undefined): CloudDriveState {
  if (!row)
    return { connected: false, account_email: null, scopes: [], connected_at: null, status: null, last_error: null };
  return {
    connected: true,
    account_email: row.account_email,
    scopes: row.scopes,
    connected_at: row.connected_at.toISOString(),
    status: row.status,
    last_error: row.last_error,
  };
}

export async function cloudDriveState(sql: Sql, workspaceId: string): Promise<CloudDriveState> {
  return toCloudDriveState(await readCloudDriveConnection(sql, workspaceId));
}

/** Starts an authorization: a state and a PKCE verifier kept (sealed) for ten minutes, and where to send the person. */
export async function startCloudDriveConnect(
  sql: Sql,
  integrations: DriveIntegrations,
  workspaceId: string,
  memberId: string | null,
): Promise<{ authorize_url: string; expires_at: string }> {
  const client = cloudDriveClientOf(integrations);
  const keyring = await secretsKeyring(sql, integrations);
  const state = randomBytes(32).toString('base64url');
  const { verifier, challenge } = pkcePair();
  const expiresAt = new Date(Date.now() + cloudDriveAuthorizationMinutes * 60_000);
  await createCloudDriveAuthorization(sql, {
    stateHash: stateHashOf(state),
    workspaceId,
    memberId,
    verifierSealed: seal(keyring, verifier, context.verifier(workspaceId)),
    expiresAt,
  });
  return {
    authorize_url: client.authorizeUrl({ state, codeChallenge: challenge }),
    expires_at: expiresAt.toISOString(),
  };
}

/** The drive's redirect back: the state taken once, the code exchanged, the tokens stored sealed. */
export async function completeCloudDriveConnect(
  sql: Sql,
  integrations: DriveIntegrations,
  query: { code?: string | undefined; state?: string | undefined; error?: string | undefined },
): Promise<{ workspaceId: string; accountEmail: string | null }> {
  const client = cloudDriveClientOf(integrations);
  if (!query.state)
    throw new ApiError('unprocessable', 'The callback has no `state`: start again with POST /cloud-drive/connect/.');
  const pending = await takeCloudDriveAuthorization(sql, stateHashOf(query.state));
  if (!pending)
    throw new ApiError(
      'unprocessable',
      'This authorization is unknown or was already used: start again with POST /cloud-drive/connect/.',
    );
  if (!pending.live)
    throw new ApiError(
      'unprocessable',
      `This authorization expired (it lasts ${cloudDriveAuthorizationMinutes} minutes): start again with POST /cloud-drive/connect/.`,
    );
  if (query.error)
    throw new ApiError(
      'unprocessable',
      `The drive did not grant access (${query.error.slice(0, 64)}): start again with POST /cloud-drive/connect/ and accept the request.`,
    );
  if (!query.code)
    throw new ApiError('unprocessable', 'The callback has no `code`: start again with POST /cloud-drive/connect/.');
  const keyring = await secretsKeyring(sql, integrations);
  const verifier = unseal(keyring, pending.code_verifier_sealed, context.verifier(pending.workspace_id));
  let grant: TokenGrant;
  let accountEmail: string | null;
  const now = Date.now();
  try {
    grant = await client.exchangeCode({ code: query.code, codeVerifier: verifier });
    // The account's email is only a label on the connection, which works without it.
    accountEmail = await client.accountEmail(grant.accessToken).catch(() => null);
  } catch (error) {
    if (error instanceof DriveError && error.kind === 'invalid_grant') {
      throw new ApiError(
        'unprocessable',
        `The drive refused the authorization code (it expired or was used): start again with POST /cloud-drive/connect/.`,
      );
    }
    if (error instanceof DriveError)
      throw new ApiError('bad_gateway', `The drive could not complete the connection: ${error.message}`);
    throw error;
  }
  await saveCloudDriveConnection(sql, {
    workspaceId: pending.workspace_id,
    accountEmail,
    scopes: grant.scopes,
    accessSealed: seal(keyring, grant.accessToken, context.access(pending.workspace_id)),
    refreshSealed: grant.refreshToken ? seal(keyring, grant.refreshToken, context.refresh(pending.workspace_id)) : null,
    expiresAt: expiryOf(grant, now),
    connectedBy: pending.member_id,
  });
  return { workspaceId: pending.workspace_id, accountEmail };
}

/** Forgets the connection and its tokens (the grant itself stays with the drive until its owner revokes it). */
export const disconnectCloudDrive = (sql: Sql, workspaceId: string) => deleteCloudDriveConnection(sql, workspaceId);

// ---------------------------------------------------------------------------------------------
// Reading files with the stored tokens.

export type CloudDriveReadReason =
  | 'not_configured'
  | 'not_connected'
  | 'reconnect_required'
  | 'forbidden'
  | 'not_found'
  | 'rate_limited'
  | 'too_large'
  | 'unsupported'
  | 'failed';

/** Why a drive file could not be read, in words a person can act on (`message`); never a token. */
export class CloudDriveReadError extends Error {
  override name = 'CloudDriveReadError';
  constructor(
    readonly reason: CloudDriveReadReason,
    message: string,
    readonly retryAfterSeconds: number | null = null,
  ) {
    super(message);
  }
}

const reconnectMessage =
  'The drive account no longer grants access (the grant was revoked or expired): connect the drive again with POST /cloud-drive/connect/.';

/** A live connection's access token, refreshed at most once per call (before expiry, or after a 401). */
class TokenSession {
  private refreshed = false;
  constructor(
    private readonly sql: Sql,
    private readonly client: CloudDriveClient,
    private readonly keyring: Keyring,
    private row: CloudDriveConnectionRow,
    public accessToken: string,
  ) {}

  get canRefresh() {
    return !this.refreshed && this.row.refresh_token_sealed !== null;
  }

  async refresh(): Promise<void> {
    this.refreshed = true;
    const { workspace_id: workspaceId, connected_at: connectedAt } = this.row;
    const refreshToken = await this.openOrReconnect(this.row.refresh_token_sealed!, context.refresh(workspaceId));
    let grant: TokenGrant;
    const now = Date.now();
    try {
      grant = await this.client.refresh(refreshToken);
    } catch (error) {
      if (error instanceof DriveError && error.kind === 'invalid_grant') {
        // Another process may have refreshed first with a drive that rotates refresh tokens: the
        // one read here is then spent, but the connection is fine. Take the fresh access token.
        const fresh = await readCloudDriveConnection(this.sql, workspaceId);
        if (
          fresh &&
          fresh.status === 'connected' &&
          fresh.connected_at.getTime() === connectedAt.getTime() &&
          fresh.refresh_token_sealed !== this.row.refresh_token_sealed
        ) {
          this.row = fresh;
          this.accessToken = await this.openOrReconnect(fresh.access_token_sealed, context.access(workspaceId));
          return;
        }
        await markCloudDriveReconnectRequired(
          this.sql,
          workspaceId,
          connectedAt,
          reconnectMessage,
          this.row.refresh_token_sealed,
        );
        throw new CloudDriveReadError('reconnect_required', reconnectMessage);
      }
      throw error;
    }
    await storeRefreshedTokens(this.sql, {
      workspaceId,
      connectedAt,
      accessSealed: seal(this.keyring, grant.accessToken, context.access(workspaceId)),
      refreshSealed: grant.refreshToken ? seal(this.keyring, grant.refreshToken, context.refresh(workspaceId)) : null,
      expiresAt: expiryOf(grant, now),
      scopes: grant.scopes.length > 0 ? grant.scopes : this.row.scopes,
    });
    this.accessToken = grant.accessToken;
  }

  async openOrReconnect(sealed: string, ctx: string): Promise<string> {
    try {
      return unseal(this.keyring, sealed, ctx);
    } catch (error) {
      if (!(error instanceof SealedSecretError)) throw error;
      const message = `The stored drive tokens cannot be opened (${error.message}); connect the drive again with POST /cloud-drive/connect/.`;
      await markCloudDriveReconnectRequired(this.sql, this.row.workspace_id, this.row.connected_at, message);
      throw new CloudDriveReadError('reconnect_required', message);
    }
  }
}

async function openSession(
  sql: Sql,
  integrations: DriveIntegrations,
  workspaceId: string,
): Promise<{ session: TokenSession; client: CloudDriveClient }> {
  const drive = integrations.cloudDrive;
  if ('missing' in drive)
    throw new CloudDriveReadError(
      'not_configured',
      `The cloud drive is not configured on this service: set ${drive.missing.join(' and ')}.`,
    );
  const row = await readCloudDriveConnection(sql, workspaceId);
  if (!row)
    throw new CloudDriveReadError(
      'not_connected',
      'No cloud drive is connected to this workspace: connect one with POST /cloud-drive/connect/.',
    );
  if (row.status === 'reconnect_required')
    throw new CloudDriveReadError('reconnect_required', row.last_error ?? reconnectMessage);
  const keyring = await secretsKeyring(sql, integrations);
  const session = new TokenSession(sql, drive, keyring, row, '');
  session.accessToken = await session.openOrReconnect(row.access_token_sealed, context.access(workspaceId));
  // Refresh a token about to expire before using it, rather than waiting for its 401.
  if (row.expires_at && row.expires_at.getTime() < Date.now() + 60_000 && session.canRefresh) await session.refresh();
  return { session, client: drive };
}

/** One call with the session's token; a 401 refreshes once and tries again. Drive errors become reasons. */
async function withToken<T>(session: TokenSession, call: (accessToken: string) => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await call(session.accessToken);
    } catch (error) {
      if (error instanceof DriveError && error.kind === 'unauthorized' && session.canRefresh) {
        await session.refresh();
        continue;
      }
      throw asReadError(error);
    }
  }
}

function asReadError(error: unknown): unknown {
  if (!(error instanceof DriveError)) return error;
  switch (error.kind) {
    case 'unauthorized':
    case 'invalid_grant':
      return new CloudDriveReadError('reconnect_required', reconnectMessage);
    case 'forbidden':
      return new CloudDriveReadError(
        'forbidden',
        `${error.message} Share the file with the connected account, or connect an account that can read it.`,
      );
    case 'not_found':
      return new CloudDriveReadError(
        'not_found',
        `${error.message} Check the file id, or share the file with the connected account.`,
      );
    case 'rate_limited':
      return new CloudDriveReadError('rate_limited', `${error.message} Try again later.`, error.retryAfterSeconds);
    case 'too_large':
      return new CloudDriveReadError('too_large', error.message);
    default:
      return new CloudDriveReadError('failed', error.message);
  }
}

export interface DriveFile {
  id: string;
  name: string;
  mimeType: string;
  webViewLink: string | null;
  content: Buffer;
  contentType: string;
}

/**
 * One file of the workspace's drive: its metadata, then its bytes (`alt=media`), or its text for a
 * native document (`files.export`: Docs and Slides as text/plain, Sheets as text/csv). Fails with a
 * CloudDriveReadError whose message a person can act on: not configured, not connected, the grant
 * revoked (the connection then reads `reconnect_required`), 403, 404, rate limited, too large.
 */
export async function readDriveFile(
  sql: Sql,
  integrations: DriveIntegrations,
  workspaceId: string,
  fileId: string,
  options: { maxBytes?: number } = {},
): Promise<DriveFile> {
  if (!DriveFileIdSchema.safeParse(fileId).success)
    throw new CloudDriveReadError(
      'not_found',
      `"${fileId.slice(0, 64)}" is not a drive file id (1 to 255 letters, digits, _ and -).`,
    );
  const { session, client } = await openSession(sql, integrations, workspaceId);
  const meta = await withToken(session, (token) => client.getFile(token, fileId));
  const exportType = nativeExportType(meta.mimeType);
  if (exportType === false) {
    throw new CloudDriveReadError(
      'unsupported',
      `"${meta.name}" is a ${meta.mimeType.replace('application/vnd.google-apps.', '')}, which has no text form to read; pick a document, a presentation, a spreadsheet or a file.`,
    );
  }
  if (exportType === null && options.maxBytes !== undefined && meta.size !== null && meta.size > options.maxBytes) {
    throw new CloudDriveReadError(
      'too_large',
      `"${meta.name}" is ${meta.size} bytes; the most that can be read is ${options.maxBytes}.`,
    );
  }
  const body = await withToken(session, (token) =>
    exportType
      ? client.exportFile(token, fileId, exportType, options.maxBytes)
      : client.download(token, fileId, options.maxBytes),
  );
  return {
    id: meta.id,
    name: meta.name,
    mimeType: meta.mimeType,
    webViewLink: meta.webViewLink,
    content: body.content,
    contentType: body.contentType,
  };
}
