/** A promise and what opens it: a test holds a transaction open on it until it says so. */
export function latch(): { open: () => void; opened: Promise<void> } {
  let open = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { open, opened };
}
