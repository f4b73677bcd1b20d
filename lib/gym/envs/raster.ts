/**
 * A tiny RGB rasteriser for `rgb_array` rendering without native dependencies: filled convex
 * polygons, filled circles and horizontal lines on a white canvas, with pygame's y-up flip
 * done by the caller's coordinates (row 0 is the top).
 * @module
 */
import type { RgbArray } from '../types.js';

/** An RGB colour. */
export type Rgb = readonly [number, number, number];

/** A canvas of `width × height` RGB pixels, white initially. */
export class Canvas {
  readonly data: Uint8Array;

  constructor(
    readonly width: number,
    readonly height: number,
  ) {
    this.data = new Uint8Array(width * height * 3).fill(255);
  }

  private set(x: number, y: number, color: Rgb): void {
    if (x < 0 || y < 0 || x >= this.width || y >= this.height) return;
    const o = (y * this.width + x) * 3;
    this.data[o] = color[0];
    this.data[o + 1] = color[1];
    this.data[o + 2] = color[2];
  }

  /** Fills the convex polygon with vertices `points` (pixel centres inside or on the edge). */
  fillPolygon(points: ReadonlyArray<readonly [number, number]>, color: Rgb): void {
    const xs = points.map((p) => p[0]);
    const ys = points.map((p) => p[1]);
    const x0 = Math.max(0, Math.floor(Math.min(...xs)));
    const x1 = Math.min(this.width - 1, Math.ceil(Math.max(...xs)));
    const y0 = Math.max(0, Math.floor(Math.min(...ys)));
    const y1 = Math.min(this.height - 1, Math.ceil(Math.max(...ys)));
    const n = points.length;
    for (let y = y0; y <= y1; y++) {
      for (let x = x0; x <= x1; x++) {
        let pos = false;
        let neg = false;
        for (let i = 0; i < n; i++) {
          const [ax, ay] = points[i];
          const [bx, by] = points[(i + 1) % n];
          const cross = (bx - ax) * (y + 0.5 - ay) - (by - ay) * (x + 0.5 - ax);
          if (cross > 0) pos = true;
          else if (cross < 0) neg = true;
        }
        if (!(pos && neg)) this.set(x, y, color);
      }
    }
  }

  /** Fills the circle of centre (cx, cy) and radius r. */
  fillCircle(cx: number, cy: number, r: number, color: Rgb): void {
    for (let y = Math.floor(cy - r); y <= Math.ceil(cy + r); y++) {
      for (let x = Math.floor(cx - r); x <= Math.ceil(cx + r); x++) {
        if ((x + 0.5 - cx) ** 2 + (y + 0.5 - cy) ** 2 <= r * r) this.set(x, y, color);
      }
    }
  }

  /** Draws the horizontal line of row y from x0 to x1. */
  hline(x0: number, x1: number, y: number, color: Rgb): void {
    for (let x = Math.max(0, Math.floor(x0)); x <= Math.min(this.width - 1, Math.ceil(x1)); x++)
      this.set(x, Math.round(y), color);
  }

  /** The image as {@link RgbArray}. */
  toRgbArray(): RgbArray {
    return { data: this.data, shape: [this.height, this.width, 3] };
  }
}
