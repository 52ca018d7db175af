/** spec "Server status": online when the last check-in is within 15 minutes, derived at read time. */
export const ONLINE_WINDOW_MS = 15 * 60 * 1000;

export function isOnline(state: string, lastSeenAt: Date | null, now: Date): boolean {
  return state === "connected" && lastSeenAt !== null && now.getTime() - lastSeenAt.getTime() <= ONLINE_WINDOW_MS;
}
