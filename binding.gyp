{
  "targets": [
    {
      "target_name": "customlabels",
      "conditions": [
        ["OS=='linux' and target_arch in ('x64', 'arm64')", {
          "sources": ["src/abi.c", "src/arena.c", "src/labelset.c", "src/addon.c"],
          "defines": ["NAPI_VERSION=8"],
          "cflags": ["-std=c11", "-O2", "-Wall", "-Wextra", "-fvisibility=hidden",
                     "-ftls-model=global-dynamic"],
          "ldflags": ["-Wl,--version-script=<(module_root_dir)/src/exports.map"],
          "conditions": [
            ["target_arch=='x64'", {"cflags": ["-mtls-dialect=gnu2"]}],
            ["target_arch=='arm64'", {"cflags": ["-mtls-dialect=desc"]}]
          ]
        }, {
          "type": "none"
        }]
      ]
    }
  ]
}
