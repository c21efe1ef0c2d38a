/**
 * Bearer tokens are JWTs. Development signs them with an HS256 secret and names the workspace as
 * the organisation; an outside identity provider is verified through its JWKS (fetched again when
 * a token names a key it has not seen, so the provider's key rotation needs no restart), and its
 * claims are read by the configured names (domain/platform/identity.ts, docs/teams.md).
 */
import { SignJWT, createRemoteJWKSet, errors, jwtVerify, type JWTPayload } from 'jose';
import { ApiError } from '../../domain/shared/errors.js';
import {
  defaultAdminRoles,
  defaultClaimNames,
  defaultSignInPolicy,
  identityFromClaims,
  type ClaimNames,
  type Identity,
  type SignInPolicy,
} from '../../domain/platform/identity.js';

interface ProviderSettings {
  issuer?: string | undefined;
  audience?: string | undefined;
  claims?: ClaimNames;
  adminRoles?: string[];
  policy?: SignInPolicy;
}

export type TokenConfig =
  | ({ kind: 'secret'; secret: string } & ProviderSettings)
  | ({
      kind: 'jwks';
      url: string;
      algorithms?: string[];
      /**
       * How long after a fetch of the JWKS a token naming an unknown key waits before the JWKS is
       * fetched again (5 s): a provider that signs with a new key at once is followed within it,
       * and a flood of made-up key ids costs the provider one request per window.
       */
      jwksCooldownMs?: number;
    } & ProviderSettings);

/** Verifies a bearer token and answers its holder; `policy` says how unknown people are treated. */
export type TokenVerifier = ((token: string) => Promise<Identity | undefined>) & { policy?: SignInPolicy };

export const devIssuer = 'outreach-workspace-service';

/** Asymmetric algorithms an outside provider may sign with; `none` and HMAC never pass. */
const providerAlgorithms = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];

/**
 * A JWKS that cannot be fetched (no answer, a timeout, not 200, not a key set) is the provider's
 * outage, not the caller's bad credential: 503, so clients retry instead of signing in again.
 * jose raises the bare JOSEError only for a JWKS answer that is not 200 OK.
 */
function providerUnreachable(error: unknown): boolean {
  if (!(error instanceof errors.JOSEError)) return true;
  return (
    error instanceof errors.JWKSTimeout || error instanceof errors.JWKSInvalid || error.constructor === errors.JOSEError
  );
}

export function createTokenVerifier(config: TokenConfig): TokenVerifier {
  const key =
    config.kind === 'secret'
      ? new TextEncoder().encode(config.secret)
      : createRemoteJWKSet(new URL(config.url), {
          cooldownDuration: config.jwksCooldownMs ?? 5_000,
          cacheMaxAge: 10 * 60_000,
        });
  const options = {
    issuer: config.issuer,
    audience: config.audience,
    algorithms: config.kind === 'secret' ? ['HS256'] : (config.algorithms ?? providerAlgorithms),
  };
  const reading = {
    claims: config.claims ?? defaultClaimNames,
    adminRoles: config.adminRoles ?? defaultAdminRoles,
    orgMayBeWorkspaceId: config.kind === 'secret',
  };
  const verify = async (token: string) => {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, key as Parameters<typeof jwtVerify>[1], options));
    } catch (error) {
      if (providerUnreachable(error))
        throw new ApiError(
          'unavailable',
          'The identity provider’s signing keys (AUTH_JWKS_URL) cannot be fetched, so no bearer token can be checked; try again shortly.',
        );
      return undefined;
    }
    return identityFromClaims(payload, reading);
  };
  return Object.assign(verify, { policy: config.policy ?? defaultSignInPolicy });
}

/** The claims of a development token: the workspace id as `org_id` (or none), and optionally who the person is. */
export interface DevelopmentClaims {
  sub: string;
  org_id?: string | null;
  org_role?: string;
  org_name?: string;
  email?: string;
  email_verified?: boolean;
  name?: string;
}

export async function mintAccessToken(
  secret: string,
  claims: DevelopmentClaims,
  ttlSeconds = 24 * 60 * 60,
): Promise<string> {
  const { sub, ...rest } = claims;
  const payload = Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined && v !== null));
  return new SignJWT(payload)
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(sub)
    .setIssuer(devIssuer)
    .setIssuedAt()
    .setExpirationTime(Math.floor(Date.now() / 1000) + ttlSeconds)
    .sign(new TextEncoder().encode(secret));
}
