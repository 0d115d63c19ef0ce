# Multi-stage build: a static mcpsearch binary on a minimal non-root image.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/mcpsearch ./cmd/mcpsearch

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/mcpsearch /usr/local/bin/mcpsearch
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/mcpsearch"]
CMD ["serve", "--transport", "http,sse", "--addr", "0.0.0.0:8080"]
