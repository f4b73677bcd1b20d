/**
 * A small progress bar on stderr with live metrics (redrawn in place on a TTY; on anything
 * else it prints nothing, so logs and pipes stay clean).
 * @module
 */

/** A stream a progress bar draws on (process.stderr, or a test's fake). */
export type ProgressStream = Pick<NodeJS.WriteStream, 'write'> & { isTTY?: boolean; columns?: number };

/** A progress bar on a stream. */
export class ProgressBar {
  private label = '';
  private current = 0;
  private total = 1;
  private info = '';
  private lastDraw = 0;
  /** True when the bar is drawn (a TTY, not disabled). */
  readonly enabled: boolean;

  /**
   * @param stream - where to draw (default stderr).
   * @param enabled - draw at all (default: when the stream is a TTY).
   */
  constructor(
    private readonly stream: ProgressStream = process.stderr,
    enabled?: boolean,
  ) {
    this.enabled = enabled ?? Boolean(stream.isTTY);
  }

  /** Starts a bar for a phase of `total` units. */
  start(label: string, total: number): void {
    this.label = label;
    this.total = Math.max(1, total);
    this.current = 0;
    this.info = '';
    this.draw(true);
  }

  /** Sets the position and the metrics text. */
  update(current: number, info = this.info): void {
    this.current = current;
    this.info = info;
    this.draw(false);
  }

  /** Prints a line above the bar. */
  log(line: string): void {
    if (!this.enabled) return;
    this.stream.write(`\r\x1b[2K${line}\n`);
    this.draw(true);
  }

  /** Clears the bar. */
  stop(): void {
    if (this.enabled) this.stream.write('\r\x1b[2K');
  }

  /** The bar's text (without terminal control codes). */
  render(width = 24): string {
    const f = Math.min(1, this.current / this.total);
    const full = Math.round(f * width);
    return `${this.label} [${'#'.repeat(full)}${'-'.repeat(width - full)}] ${this.current}/${this.total}${this.info ? ` ${this.info}` : ''}`;
  }

  private draw(force: boolean): void {
    if (!this.enabled) return;
    const now = Date.now();
    if (!force && now - this.lastDraw < 100) return;
    this.lastDraw = now;
    const cols = this.stream.columns ?? 120;
    this.stream.write(`\r\x1b[2K${this.render().slice(0, Math.max(20, cols - 1))}`);
  }
}
