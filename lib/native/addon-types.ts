/** Allocator counters of one device as the addon reports them. */
export interface NativeMemoryStats {
  currentBytes: number;
  peakBytes: number;
  limitBytes: number | null;
}

/** The CPU backend: always present. */
export interface CpuBackend {
  name: 'cpu';
  device: 'cpu';
  /** Threads of the kernel thread pool (SINKFLEX_NUM_THREADS or one per core). */
  threads: number;
  hardwareConcurrency: number;
  /** Vector extensions detected at run time, e.g. `['avx2', 'fma', 'avx512f']`. */
  features: string[];
}

/** A CUDA device: present only when the binary has CUDA kernels and a GPU and driver exist. */
export interface CudaBackend {
  name: 'cuda';
  /** `'cuda:<index>'`. */
  device: string;
  index: number;
  deviceName: string;
  /** Device memory in bytes. */
  totalMemory: number;
  /** e.g. `'9.0'`. */
  computeCapability: string;
  multiProcessors: number;
}

/** One compute backend. */
export type Backend = CpuBackend | CudaBackend;

/** How the native addon was built. */
export interface NativeBuildInfo {
  /** The package version the binary was compiled from. */
  version: string;
  napiVersion: number;
  /** True when the binary contains CUDA kernels (it may still find no GPU). */
  cudaCompiled: boolean;
  compiler: string;
}

/** Functions of native/addon/core_binding.cc. */
export interface CoreAddon {
  /** The package version the binary was built from. */
  version(): string;
  buildInfo(): NativeBuildInfo;
  backends(): Backend[];
  cudaStatus(): { compiled: boolean; devices: number; reason: string };
  memoryStats(device: string): NativeMemoryStats;
  resetPeak(device: string): void;
  setLimit(device: string, bytes: number | null): void;
  allocTracked(count: number): Float32Array;
  setErrorClasses(classes: {
    OutOfMemoryError: new (message: string) => Error;
    DeviceError: new (message: string) => Error;
  }): void;
}
