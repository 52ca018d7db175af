import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TLSSocket } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPgDb } from "./db.js";

// DATABASE_CA_FILE end to end against the real Postgres, which speaks no TLS on this machine: a
// front on a port of its own answers the client's SSLRequest with 'S', terminates TLS with a
// certificate of the test's, and relays the plaintext to Postgres. Clients that do not ask for
// TLS are refused, as a Postgres with `hostssl` lines only would refuse them.

const url = process.env.DATABASE_URL;
/** The 8-byte SSLRequest: length 8, then the code 80877103 (1234 << 16 | 5679). */
const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);

const openssl = (...args: string[]) => execFileSync("openssl", args, { stdio: "ignore" });

/** A CA (ca.crt, ca.key) in `dir`, under `name`. */
function writeCa(dir: string, name: string): void {
  openssl(
    ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2"],
    ...["-keyout", join(dir, `${name}.key`), "-out", join(dir, `${name}.crt`), "-subj", `/CN=${name}`],
    ...["-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"],
  );
}

/** A server certificate `<name>.crt` (and key) for `altNames`, signed by the CA `ca`. */
function writeServerCertificate(dir: string, name: string, ca: string, altNames: string): void {
  const at = (file: string) => join(dir, file);
  openssl(
    ...["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"],
    ...["-keyout", at(`${name}.key`), "-out", at(`${name}.csr`), "-subj", `/CN=${name}`],
  );
  writeFileSync(at(`${name}.ext`), `subjectAltName=${altNames}\n`);
  openssl(
    ...["x509", "-req", "-in", at(`${name}.csr`), "-CA", at(`${ca}.crt`), "-CAkey", at(`${ca}.key`)],
    ...["-CAcreateserial", "-days", "2", "-out", at(`${name}.crt`), "-extfile", at(`${name}.ext`)],
  );
}

/** The TLS front: listens on a free loopback port, relays to `target` once TLS is up. */
async function startTlsFront(target: URL, key: string, cert: string): Promise<{ port: number; server: Server }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.once("data", (first) => {
      if (!first.subarray(0, 8).equals(SSL_REQUEST)) {
        socket.destroy();
        return;
      }
      socket.write("S");
      const tls = new TLSSocket(socket, { isServer: true, key, cert });
      const upstream = createConnection({ host: target.hostname, port: Number(target.port || 5432) });
      tls.pipe(upstream).pipe(tls);
      const end = () => {
        tls.destroy();
        upstream.destroy();
      };
      tls.once("error", end);
      upstream.once("error", end);
    });
  });
  server.on("close", () => {
    for (const socket of sockets) socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { port: (server.address() as { port: number }).port, server };
}

describe.skipIf(!url)("Postgres over TLS (DATABASE_CA_FILE)", () => {
  const dir = mkdtempSync(join(tmpdir(), "replay-db-tls-"));
  const fronts: Server[] = [];
  const through = (port: number) => {
    const front = new URL(url as string);
    front.hostname = "127.0.0.1";
    front.port = String(port);
    return front.toString();
  };
  const read = (file: string) => readFileSync(join(dir, file), "utf8");
  let good: number;
  let wrongHost: number;

  beforeAll(async () => {
    writeCa(dir, "db-ca");
    writeCa(dir, "other-ca");
    writeServerCertificate(dir, "db", "db-ca", "IP:127.0.0.1,DNS:localhost");
    writeServerCertificate(dir, "elsewhere", "db-ca", "DNS:replay-db-rw.example");
    const target = new URL(url as string);
    const a = await startTlsFront(target, read("db.key"), read("db.crt"));
    const b = await startTlsFront(target, read("elsewhere.key"), read("elsewhere.crt"));
    fronts.push(a.server, b.server);
    good = a.port;
    wrongHost = b.port;
  });
  afterAll(async () => {
    await Promise.all(fronts.map((s) => new Promise((resolve) => s.close(resolve))));
    rmSync(dir, { recursive: true, force: true });
  });

  const query = async (port: number, ca: string | undefined) => {
    const db = createPgDb({ url: through(port), schema: "public", poolMax: 1, ca });
    try {
      return (await db.query<{ ok: number }>("SELECT 1 AS ok")).rows;
    } finally {
      await db.close();
    }
  };

  it("connects through TLS when the server's certificate chains to the CA and names the host", async () => {
    expect(await query(good, read("db-ca.crt"))).toEqual([{ ok: 1 }]);
  });

  it("refuses a certificate of another CA, and one for another host name", async () => {
    await expect(query(good, read("other-ca.crt"))).rejects.toThrow(/self.signed|unable to verify|certificate/i);
    await expect(query(wrongHost, read("db-ca.crt"))).rejects.toThrow(/altnames|does not match|Hostname/i);
  });

  it("without a CA asks for no TLS (the front, like a hostssl-only Postgres, then refuses it)", async () => {
    await expect(query(good, undefined)).rejects.toThrow();
  });
});
