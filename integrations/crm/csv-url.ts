/**
 * Reads a CSV at an address for an import: http or https only, through the page reader's address
 * checks (integrations/web: no private, loopback or link-local address, unless the reader is
 * allowed them), no redirect followed, a time limit, at most `maxBytes`.
 */
import http from 'node:http';
import https from 'node:https';
import { checkLiteralAddress, guardedLookup, pageUrl } from '../web/web-page.js';

export class CsvUrlFailure extends Error {
  override name = 'CsvUrlFailure';
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

export async function readCsvUrl(
  address: string,
  o: { allowPrivateNetworks: boolean; maxBytes: number; timeoutMs?: number },
): Promise<Buffer> {
  let url: URL;
  try {
    url = pageUrl(address);
    checkLiteralAddress(url, o.allowPrivateNetworks);
  } catch (error) {
    throw new CsvUrlFailure((error as Error).message, false);
  }
  const lookup = guardedLookup(o.allowPrivateNetworks);
  return new Promise((resolve, reject) => {
    const request = (url.protocol === 'https:' ? https : http).request(url, {
      method: 'GET',
      lookup,
      signal: AbortSignal.timeout(o.timeoutMs ?? 60_000),
      headers: { accept: 'text/csv,text/plain;q=0.9,*/*;q=0.1', 'user-agent': 'OutreachWorkspaceImporter/0.0' },
    });
    request.on('error', (error: Error & { code?: string }) => {
      if (error.name === 'AbortError' || error.name === 'TimeoutError')
        return reject(new CsvUrlFailure(`${url.host} did not answer in time.`, true));
      const privateRefusal = /private network/.test(error.message);
      reject(
        new CsvUrlFailure(
          privateRefusal ? error.message : `Could not read ${url.host}: ${error.code ?? error.message}.`,
          !privateRefusal && error.code !== 'ENOTFOUND',
        ),
      );
    });
    request.once('response', (response) => {
      const status = response.statusCode ?? 0;
      if (status < 200 || status >= 300) {
        response.resume();
        return reject(
          new CsvUrlFailure(`${url.host} answered ${status} for the CSV.`, status === 429 || status >= 500),
        );
      }
      const chunks: Buffer[] = [];
      let size = 0;
      response.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > o.maxBytes) {
          request.destroy();
          return reject(new CsvUrlFailure(`The CSV at ${url.host} is larger than ${o.maxBytes} bytes.`, false));
        }
        chunks.push(chunk);
      });
      response.once('end', () => resolve(Buffer.concat(chunks)));
      response.once('error', (error) =>
        reject(new CsvUrlFailure(`${url.host} broke off the CSV: ${error.message}.`, true)),
      );
    });
    request.end();
  });
}
