# Multi-stage build of the one opsq binary; docker-compose.yml runs it.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/opsq ./cmd/opsq

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/opsq /usr/local/bin/opsq
EXPOSE 3999
ENTRYPOINT ["/usr/local/bin/opsq"]
CMD ["serve"]
