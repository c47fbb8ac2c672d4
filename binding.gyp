{
  "targets": [
    {
      "target_name": "customlabels",
      "conditions": [
        ["OS=='linux' and target_arch in ('x64', 'arm64')", {
          "sources": ["src/abi.c", "src/arena.c", "src/labelset.c", "src/peers.c",
                      "src/process_ctx.c", "src/status.c", "src/addon.c"],
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
                      "dump/otel.c", "dump/thread.c", "dump/glibc_compat.c"],
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
