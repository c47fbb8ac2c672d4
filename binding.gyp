{
  "variables": {
    # Frame mode's companion (src/frame/) is built for the running Node
    # when it is 22 or later (NODE_MODULE_VERSION 127); scripts/prebuild.js
    # turns it off (npm_config_customlabels_v8=0) and builds it per major.
    "customlabels_v8%": 1
  },
  "targets": [
    {
      "target_name": "customlabels",
      "conditions": [
        ["OS=='linux' and target_arch in ('x64', 'arm64')", {
          "sources": ["src/tls.c", "src/placement.c", "src/thread_mark.c", "src/arena.c",
                      "src/peers.c", "src/process_ctx.c", "src/status.c",
                      "src/addon.c"],
          "libraries": ["-Wl,--push-state,--no-as-needed", "-l:libdl.so.2", "-l:libpthread.so.0",
                        "-Wl,--pop-state"],
          "defines": ["NAPI_VERSION=8"],
          "cflags": ["-std=c11", "-Wall", "-Wextra", "-fvisibility=hidden",
                     "-ftls-model=global-dynamic"],
          "ldflags": ["-Wl,--version-script=<(module_root_dir)/src/exports.map"],
          "conditions": [
            ["target_arch=='x64'", {"sources": ["src/arch_x86_64.c"],
                                    "cflags": ["-mtls-dialect=gnu2"]}],
            ["target_arch=='arm64'", {"sources": ["src/arch_aarch64.c"],
                                      "cflags": ["-mtls-dialect=desc"]}]
          ]
        }, {
          "type": "none"
        }]
      ]
    },
    {
      "target_name": "customlabels_v8",
      "product_name": "customlabels-v8",
      # build/Release/v8/ (gyp's make also links a copy into build/Release,
      # so lib/addon.js names the main addon's file there rather than letting
      # node-gyp-build take the first .node file it lists).
      "product_dir": "<(PRODUCT_DIR)/v8",
      "conditions": [
        ["OS=='linux' and target_arch in ('x64', 'arm64') and node_module_version >= 127 and customlabels_v8 == 1", {
          "sources": ["src/frame/v8layout.cc", "src/frame/chunks.cc", "src/frame/writer.cc",
                      "src/frame/publish.cc", "src/frame/module.cc"],
          "cflags_cc": ["-std=c++20", "-Wall", "-Wextra", "-Wno-unused-parameter",
                        "-Wno-cast-function-type", "-fvisibility=hidden"],
          "cflags_cc!": ["-std=gnu++17", "-std=gnu++20", "-fno-exceptions"],
          "libraries": ["-Wl,--push-state,--no-as-needed", "-l:libdl.so.2", "-Wl,--pop-state"]
        }, {
          "type": "none"
        }]
      ]
    },
    {
      "target_name": "customlabels-dump",
      "conditions": [
        ["OS=='linux' and target_arch in ('x64', 'arm64')", {
          "type": "executable",
          "sources": ["dump/main.c", "dump/snapshot.c", "dump/sample.c",
                      "dump/sample_threads.c", "dump/sample_read.c",
                      "dump/tally.c", "dump/report.c", "dump/out.c",
                      "dump/locate.c", "dump/elfinfo.c", "dump/tlsmath.c",
                      "dump/ptrace.c", "dump/mem.c", "dump/proc.c",
                      "dump/labels.c", "dump/privilege.c", "dump/proto.c",
                      "dump/otel.c", "dump/thread.c", "dump/frame.c", "dump/glibc_compat.c"],
          "cflags": ["-std=c11", "-Wall", "-Wextra",
                     "-fstack-protector-strong", "-U_FORTIFY_SOURCE", "-D_FORTIFY_SOURCE=2",
                     "-fPIE"],
          "ldflags": ["-pie", "-Wl,-z,relro,-z,now"],
          "conditions": [
            ["target_arch=='x64'", {"sources": ["dump/arch_x86_64.c"]}],
            ["target_arch=='arm64'", {"sources": ["dump/arch_aarch64.c"]}]
          ]
        }, {
          "type": "none"
        }]
      ]
    }
  ]
}
