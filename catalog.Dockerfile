# The file-based catalog (make catalog) as an image: its content under /configs, where the label
# says. OLM v1's catalogd reads it as it is; an OLM v0 CatalogSource serves it with `opm serve
# /configs` (docs/deploying.md).
FROM scratch
COPY catalog /configs
LABEL operators.operatorframework.io.index.configs.v1=/configs
