{
  "targets": [
    {
      "target_name": "sinkflex",
      "sources": ["<!@(node native/sources.mjs cc)"],
      "dependencies": ["<!(node -p \"require('node-addon-api').targets\"):node_addon_api_except"],
      "defines": ["NAPI_VERSION=8", "SINKFLEX_VERSION=\"<!(node -p \"require('./package.json').version\")\""],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti", "-std=gnu++17"],
      "cflags": ["-O3", "-fexceptions", "-pthread"],
      "cflags_cc": ["-O3", "-std=c++17", "-fexceptions", "-frtti", "-pthread"],
      "ldflags": ["-pthread"],
      "xcode_settings": {
        "GCC_ENABLE_CPP_EXCEPTIONS": "YES",
        "CLANG_CXX_LANGUAGE_STANDARD": "c++17"
      },
      "msvs_settings": { "VCCLCompilerTool": { "ExceptionHandling": 1 } }
    }
  ]
}
