import { readdirSync, readFileSync, readlinkSync } from "node:fs";

/**
 * What the benchmarks read from /proc (Linux): CPU time, resident memory, child processes and their
 * listening ports. CPU time is cheap enough to read around a measured run without disturbing it,
 * and on a 2-core machine CPU time per request is where the time goes.
 */

/** clock ticks per second (USER_HZ): 100 on every Linux build Node supports. */
const TICKS_PER_S = 100;

/** A set of processes whose CPU time is added up: fixed pids, or every process whose command line contains a string. */
export type CpuGroup = { label: string; pids?: number[]; cmdlineIncludes?: string };

export type CpuSnapshot = { atMs: number; byPid: Map<number, { label: string; cpuMs: number }>; machineBusyMs: number };

/** utime + stime of one process in ms, or undefined once it is gone. */
export function processCpuMs(pid: number): number | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // The command name (field 2) may contain spaces and parentheses; the fields after its last ")" are fixed.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // fields[0] is field 3 (state): utime is field 14, stime field 15.
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_S;
}

/** The peak resident set size of one process in MiB (VmHWM), or undefined once it is gone. */
export function processPeakRssMb(pid: number): number | undefined {
  try {
    const match = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return match ? Number(match[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

type ProcInfo = { pid: number; ppid: number; cmdline: string };

/** Every process visible in /proc with its parent and command line (NULs read as spaces). */
export function listProcesses(): ProcInfo[] {
  const list: ProcInfo[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const cmdline = readFileSync(`/proc/${name}/cmdline`, "utf8").replaceAll("\0", " ").trim();
      list.push({ pid: Number(name), ppid, cmdline });
    } catch {
      // exited while listing
    }
  }
  return list;
}

/** Direct children of `ppid` whose command line ends with `suffix` (the harness does not expose its pids). */
export function findChildPids(ppid: number, suffix: string): number[] {
  return listProcesses()
    .filter((p) => p.ppid === ppid && p.cmdline.endsWith(suffix))
    .map((p) => p.pid);
}

/** Busy time of the whole machine (all cores, everything but idle and iowait) in ms. */
export function machineBusyMs(): number {
  const line = readFileSync("/proc/stat", "utf8").split("\n", 1)[0] ?? "";
  const ticks = line.trim().split(/\s+/).slice(1).map(Number);
  const total = ticks.reduce((a, b) => a + b, 0);
  const idle = (ticks[3] ?? 0) + (ticks[4] ?? 0);
  return ((total - idle) * 1000) / TICKS_PER_S;
}

/** What every load worker's command line holds (load.ts starts them as `node <dir>/load-worker.js <spec>`). */
const LOAD_WORKER = "/load-worker.js ";

export function snapshotCpu(groups: readonly CpuGroup[]): CpuSnapshot {
  const byPid = new Map<number, { label: string; cpuMs: number }>();
  const needsScan = groups.some((g) => g.cmdlineIncludes);
  const procs = needsScan ? listProcesses() : [];
  for (const group of groups) {
    const pids = [...(group.pids ?? [])];
    if (group.cmdlineIncludes) {
      // No load worker (this one or a sibling of a load in several processes): a worker's command
      // line carries its spec, these very strings included.
      for (const p of procs)
        if (!p.cmdline.includes(LOAD_WORKER) && p.cmdline.includes(group.cmdlineIncludes)) pids.push(p.pid);
    }
    for (const pid of pids) {
      const cpuMs = processCpuMs(pid);
      if (cpuMs !== undefined && !byPid.has(pid)) byPid.set(pid, { label: group.label, cpuMs });
    }
  }
  return { atMs: performance.now(), byPid, machineBusyMs: machineBusyMs() };
}

/**
 * CPU ms each group used between two snapshots. A process that appeared in between (a pool's new
 * Postgres backend) counts from zero; one that exited in between is lost, which a steady load avoids.
 */
export function cpuDelta(
  before: CpuSnapshot,
  after: CpuSnapshot,
): { byLabelMs: Record<string, number>; machineBusyMs: number; elapsedMs: number } {
  const byLabelMs: Record<string, number> = {};
  for (const [pid, { label, cpuMs }] of after.byPid) {
    byLabelMs[label] = (byLabelMs[label] ?? 0) + cpuMs - (before.byPid.get(pid)?.cpuMs ?? 0);
  }
  return { byLabelMs, machineBusyMs: after.machineBusyMs - before.machineBusyMs, elapsedMs: after.atMs - before.atMs };
}

/** TCP ports a process listens on (IPv4 and IPv6), from its socket inodes and /proc/net/tcp{,6}. */
export function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match) inodes.add(match[1] as string);
    } catch {
      // closed while listing
    }
  }
  const ports = new Set<number>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let lines: string[];
    try {
      lines = readFileSync(table, "utf8").trim().split("\n").slice(1);
    } catch {
      continue;
    }
    for (const line of lines) {
      // sl local_address rem_address st ... inode: state 0A is LISTEN.
      const cols = line.trim().split(/\s+/);
      if (cols[3] === "0A" && inodes.has(cols[9] as string))
        ports.add(Number.parseInt((cols[1] as string).split(":")[1] as string, 16));
    }
  }
  return [...ports];
}
