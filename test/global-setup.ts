/**
 * Says once, at the top of a run, which tests report themselves skipped and why: vitest lists a
 * skipped test without the reason its skipIf carried.
 */
export function setup(): void {
  const missing = ["DATABASE_URL", "NATS_URL"].filter((name) => !process.env[name]);
  if (missing.length === 0) {
    process.stdout.write("replay tests: against the real Postgres and NATS (DATABASE_URL, NATS_URL)\n");
    return;
  }
  process.stdout.write(
    `replay tests: ${missing.join(" and ")} unset, so this run uses the embedded Postgres and the in-process bus;\n` +
      "  the distributed-mode tests (test/auth, test/common, the distributed half of test/servers) and the NATS\n" +
      "  adapter and fault tests report themselves skipped. Set both to run everything against the real ones.\n",
  );
}
