# Rendered by the myproxy chart. Runs as non-root with a read-only root filesystem:
# nginx writes only to /tmp (pid, temp files) and /var/cache/nginx.
worker_processes auto;
pid /tmp/nginx.pid;
error_log /dev/stderr warn;

events {
  worker_connections 1024;
}

http {
  default_type application/octet-stream;
  access_log /dev/stdout;
  server_tokens off;
  client_body_temp_path /tmp/client_temp;
  proxy_temp_path /tmp/proxy_temp;
  fastcgi_temp_path /tmp/fastcgi_temp;
  uwsgi_temp_path /tmp/uwsgi_temp;
  scgi_temp_path /tmp/scgi_temp;

  # nginx reads "$name" in a header value or a response body as a variable; the chart writes
  # a "$" of the values as ${myproxy_dollar}, so that what a MyProxy says is what is sent.
  geo $myproxy_dollar {
    default "$";
  }

  server {
    listen {{ include "myproxy.httpPort" . }};
    {{- if .Values.tls.secretName }}
    listen {{ include "myproxy.httpsPort" . }} ssl;
    ssl_certificate /etc/nginx/tls/tls.crt;
    ssl_certificate_key /etc/nginx/tls/tls.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    {{- end }}

    # Probes of the kubelet; never proxied.
    location = /healthz {
      access_log off;
      default_type text/plain;
      return 200 "ok\n";
    }
    {{- $hasRoot := false }}
    {{- range .Values.routes }}
    {{- if eq .path "/" }}{{ $hasRoot = true }}{{ end }}
    {{- include "myproxy.refuseUnless" (list "routes[].path" .path "^/[A-Za-z0-9._~!&()*+,=:@%/-]*$") }}
    {{- include "myproxy.refuseUnless" (list "routes[].upstream" .upstream "^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~!&()*+,=:@%/-]*)?$") }}

    location {{ .path }} {
      proxy_pass {{ .upstream }};
      proxy_http_version 1.1;
      proxy_set_header Host $proxy_host;
      proxy_set_header X-Real-IP $remote_addr;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-Host $host;
      {{- with .timeoutSeconds }}
      proxy_connect_timeout {{ . }}s;
      proxy_send_timeout {{ . }}s;
      proxy_read_timeout {{ . }}s;
      {{- end }}
      {{- range $name, $value := .setHeaders }}
      {{- include "myproxy.refuseUnless" (list "routes[].setHeaders name" $name "^[A-Za-z0-9][A-Za-z0-9!#%&*+.^_`|~-]{0,127}$") }}
      {{- include "myproxy.refuseUnless" (list "routes[].setHeaders value" $value "^[ !#-\\[\\]-~]*$") }}
      proxy_set_header {{ $name }} {{ include "myproxy.nginxString" $value }};
      {{- end }}
    }
    {{- end }}
    {{- if not $hasRoot }}

    # No route matched.
    location / {
      default_type text/plain;
      return {{ .Values.defaultResponse.status | int }} {{ include "myproxy.nginxString" .Values.defaultResponse.body }};
    }
    {{- end }}
  }
}
