# Multi-stage build: a static mcpsearch binary on a slim Debian image that
# also holds the OCR programs, run as a non-root user.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/mcpsearch ./cmd/mcpsearch

FROM debian:bookworm-slim
# OCR of scans and images: tesseract with its English data, and pdftoppm and
# pdfinfo (poppler-utils) to render PDF pages. For more languages add their
# packages (tesseract-ocr-deu, tesseract-ocr-fra, ...) and name them in
# MCP_docs_ocr_languages. ca-certificates lets `mcpsearch models pull` reach
# the Hugging Face hub over HTTPS. The user has the uid of distroless's
# nonroot; it owns the models folder, so that a named volume mounted there
# starts out writable by it.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates tesseract-ocr tesseract-ocr-eng poppler-utils \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 65532 --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin nonroot \
 && mkdir -p /var/lib/mcpsearch/models \
 && chown -R nonroot:nonroot /var/lib/mcpsearch
# Where `mcpsearch models pull` installs model2vec models and the server
# looks for them (the home folder of nonroot does not exist).
ENV MCP_embed_models_dir=/var/lib/mcpsearch/models
COPY --from=build /out/mcpsearch /usr/local/bin/mcpsearch
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/mcpsearch"]
CMD ["serve", "--transport", "http,sse", "--addr", "0.0.0.0:8080"]
