//! `/api/files`: uploads (multipart, streamed), downloads (whole or by
//! range), records and deletion.

use actix_multipart::{Field, Multipart};
use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{
    HttpRequest, HttpResponse, HttpResponseBuilder, ResponseError, delete, get, post, web,
};
use api_types::{ErrorEnvelope, FileInfo};
use files::{FileError, FileRecord, RangeRequest, Upload, UploadTicket, Visibility};
use futures_util::StreamExt as _;
use kernel::Code;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::LazyCaller;
use crate::respond::{created, no_content, ok};

/// Room for the multipart framing around a file at its size limit.
const FRAMING_BYTES: u64 = 64 * 1024;
/// Longest text field of an upload (`visibility`).
const TEXT_FIELD_BYTES: usize = 64;

fn info(record: FileRecord) -> FileInfo {
    FileInfo {
        id: record.id,
        name: record.name,
        content_type: record.content_type,
        size: record.size,
        sha256: record.sha256,
        visibility: record.visibility,
        owner_id: record.owner_id,
        created_at: record.created_at,
    }
}

/// Uploads a file (`multipart/form-data`: `file`, optional `visibility`
/// PRIVATE or PUBLIC). Needs create on `svc.files`; at most `files.max_bytes`.
#[utoipa::path(tag = "files", operation_id = "uploadFile", security(("bearer" = [])),
    request_body(content_type = "multipart/form-data", description = "`file` (the bytes, with its name and type) and optional `visibility` (PRIVATE or PUBLIC)"),
    responses((status = 201, description = "The file's record", body = inline(api_types::DataEnvelope<FileInfo>)),
        (status = 400, description = "No file, an unknown field, or bytes that are not of the declared type", body = ErrorEnvelope),
        (status = 401, description = "No valid credential", body = ErrorEnvelope),
        (status = 403, description = "No create grant on svc.files", body = ErrorEnvelope),
        (status = 413, description = "Larger than files.max_bytes; nothing kept", body = ErrorEnvelope),
        (status = 415, description = "Not multipart/form-data", body = ErrorEnvelope)))]
#[post("")]
pub async fn upload_file(
    state: web::Data<AppState>,
    req: HttpRequest,
    caller: LazyCaller,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let request = caller.request();
    let ticket = state.services.files.begin(request).await?;
    let multipart = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().starts_with("multipart/form-data"));
    if !multipart {
        return Err(ApiError::new(
            Code::UnsupportedMediaType,
            "An upload is multipart/form-data",
        ));
    }
    let declared_length = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared_length.is_some_and(|n| n > ticket.max_bytes().saturating_add(FRAMING_BYTES)) {
        return Err(FileError::TooLarge(ticket.max_bytes()).into());
    }
    let parts = read_parts(&state, ticket, Multipart::new(req.headers(), payload)).await?;
    let Some((upload, name, declared)) = parts.file else {
        return Err(ApiError::field(Code::InvalidPayload, "file", "is required"));
    };
    let record = state
        .services
        .files
        .record(
            request,
            ticket,
            upload,
            &name,
            declared.as_deref(),
            parts.visibility,
        )
        .await?;
    Ok(created(info(record)))
}

/// The fields of an upload.
struct Parts {
    file: Option<(Upload, String, Option<String>)>,
    visibility: Visibility,
}

/// Reads the fields, streaming the file to storage; nothing is kept when
/// anything fails.
async fn read_parts(
    state: &AppState,
    ticket: UploadTicket,
    mut multipart: Multipart,
) -> Result<Parts, ApiError> {
    let mut parts = Parts {
        file: None,
        visibility: Visibility::Private,
    };
    let outcome = async {
        while let Some(field) = multipart.next().await {
            let mut field = field.map_err(malformed)?;
            match field.name().unwrap_or_default() {
                "file" if parts.file.is_none() => {
                    let name = field
                        .content_disposition()
                        .and_then(|d| d.get_filename())
                        .unwrap_or("file")
                        .to_owned();
                    let declared = field.content_type().map(ToString::to_string);
                    let mut upload = state.services.files.upload(ticket).await?;
                    let streamed = stream_into(&mut field, &mut upload).await;
                    parts.file = Some((upload, name, declared));
                    streamed?;
                }
                "visibility" => {
                    let text = read_text(&mut field).await?;
                    parts.visibility = Visibility::parse(text.trim()).ok_or_else(|| {
                        ApiError::field(
                            Code::InvalidPayload,
                            "visibility",
                            "must be PRIVATE or PUBLIC",
                        )
                    })?;
                }
                "file" => {
                    return Err(ApiError::field(
                        Code::InvalidPayload,
                        "file",
                        "one file per upload",
                    ));
                }
                other => {
                    return Err(ApiError::field(
                        Code::InvalidPayload,
                        other.to_owned(),
                        "is not a field of an upload (file, visibility)",
                    ));
                }
            }
        }
        Ok::<(), ApiError>(())
    }
    .await;
    match outcome {
        Ok(()) => Ok(parts),
        Err(error) => {
            if let Some((upload, _, _)) = parts.file.take() {
                state.services.files.discard(upload).await;
            }
            Err(error)
        }
    }
}

async fn stream_into(field: &mut Field, upload: &mut Upload) -> Result<(), ApiError> {
    while let Some(chunk) = field.next().await {
        upload.write(&chunk.map_err(malformed)?).await?;
    }
    Ok(())
}

async fn read_text(field: &mut Field) -> Result<String, ApiError> {
    let mut text = Vec::new();
    while let Some(chunk) = field.next().await {
        text.extend_from_slice(&chunk.map_err(malformed)?);
        if text.len() > TEXT_FIELD_BYTES {
            return Err(ApiError::field(
                Code::InvalidPayload,
                "visibility",
                "must be PRIVATE or PUBLIC",
            ));
        }
    }
    String::from_utf8(text).map_err(|_| {
        ApiError::field(
            Code::InvalidPayload,
            "visibility",
            "must be PRIVATE or PUBLIC",
        )
    })
}

fn malformed(error: actix_multipart::MultipartError) -> ApiError {
    ApiError::field(
        Code::InvalidPayload,
        "file",
        format!("the multipart body is malformed: {error}"),
    )
}

/// The bytes of a file: PUBLIC files without a credential, others under
/// read grants on `svc.files`; one `Range` of bytes answers 206.
#[utoipa::path(tag = "files", operation_id = "downloadFile", security((), ("bearer" = [])), params(("id" = uuid::Uuid, Path)),
    responses((status = 200, description = "The bytes, with their content type"),
        (status = 206, description = "The range of bytes asked for"),
        (status = 304, description = "Not modified (If-None-Match)"),
        (status = 401, description = "A PRIVATE file without a credential", body = ErrorEnvelope),
        (status = 403, description = "No read grant on svc.files", body = ErrorEnvelope),
        (status = 404, description = "No such file for this caller", body = ErrorEnvelope),
        (status = 416, description = "A range outside the file", body = ErrorEnvelope)))]
#[get("/{id}")]
pub async fn download_file(
    state: web::Data<AppState>,
    req: HttpRequest,
    caller: Option<LazyCaller>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let request = caller.as_ref().map(LazyCaller::request);
    let range = RangeRequest::parse(
        req.headers()
            .get(header::RANGE)
            .and_then(|v| v.to_str().ok()),
    );
    let found = match state.services.files.download(request, &id, range).await {
        Ok(found) => found,
        Err(FileError::RangeNotSatisfiable(size)) => {
            let error = ApiError::from(FileError::RangeNotSatisfiable(size));
            let mut response = error.error_response();
            if let Ok(value) = HeaderValue::from_str(&format!("bytes */{size}")) {
                response.headers_mut().insert(header::CONTENT_RANGE, value);
            }
            return Ok(response);
        }
        Err(error) => return Err(error.into()),
    };
    let file = &found.file;
    let etag = format!("\"{}\"", file.sha256);
    let mut response = match found.range {
        Some(_) => HttpResponse::build(StatusCode::PARTIAL_CONTENT),
        None => HttpResponse::Ok(),
    };
    file_headers(&mut response, file, &etag);
    let unchanged = req
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .any(|tag| tag.trim() == etag || tag.trim() == "*")
        });
    if unchanged {
        return Ok(HttpResponse::NotModified()
            .insert_header((header::ETAG, etag))
            .finish());
    }
    let length = match found.range {
        Some(range) => {
            response.insert_header((
                header::CONTENT_RANGE,
                format!("bytes {}-{}/{}", range.start, range.end, file.size),
            ));
            range.len()
        }
        None => file.size,
    };
    response.no_chunking(length);
    let body = found
        .body
        .map(|part| part.map_err(|e| actix_web::Error::from(ApiError::from(e))));
    Ok(response.streaming(body))
}

/// Type, length, caching and the guards against a file run as a page.
fn file_headers(response: &mut HttpResponseBuilder, file: &files::StoredFile, etag: &str) {
    let disposition = if files::is_active_content(&file.content_type) {
        "attachment"
    } else {
        "inline"
    };
    response
        .insert_header((header::CONTENT_TYPE, file.content_type.as_str()))
        .insert_header((header::ETAG, etag))
        .insert_header((header::ACCEPT_RANGES, "bytes"))
        .insert_header((header::CONTENT_ENCODING, "identity"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; sandbox",
        ))
        .insert_header((
            header::CACHE_CONTROL,
            if file.public {
                "public, max-age=3600"
            } else {
                "private, no-cache"
            },
        ))
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!(
                "{disposition}; filename=\"{}\"; filename*=UTF-8''{}",
                ascii_name(&file.name),
                percent_encoded(&file.name)
            ),
        ));
}

/// The name with anything outside printable ASCII (and quotes, backslashes) as `_`.
fn ascii_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// RFC 5987 encoding of the name.
fn percent_encoded(name: &str) -> String {
    name.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The record of a file (PUBLIC ones without a credential).
#[utoipa::path(tag = "files", operation_id = "getFileMeta", security((), ("bearer" = [])), params(("id" = uuid::Uuid, Path)),
    responses((status = 200, description = "The record", body = inline(api_types::DataEnvelope<FileInfo>)),
        (status = 401, description = "A PRIVATE file without a credential", body = ErrorEnvelope),
        (status = 403, description = "No read grant on svc.files", body = ErrorEnvelope),
        (status = 404, description = "No such file for this caller", body = ErrorEnvelope)))]
#[get("/{id}/meta")]
pub async fn file_meta(
    state: web::Data<AppState>,
    caller: Option<LazyCaller>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    if let Some(record) = state.services.files.public_meta(&id).await? {
        return Ok(ok(info(record)));
    }
    let Some(caller) = caller else {
        return Err(FileError::CredentialRequired.into());
    };
    let record = state.services.files.meta(caller.request(), &id).await?;
    Ok(ok(info(record)))
}

/// Deletes a file: its record (delete grant on `svc.files`, row filters
/// apply), then its bytes.
#[utoipa::path(tag = "files", operation_id = "deleteFile", security(("bearer" = [])), params(("id" = uuid::Uuid, Path)),
    responses((status = 204, description = "Deleted"),
        (status = 401, description = "No valid credential", body = ErrorEnvelope),
        (status = 403, description = "No delete grant on svc.files", body = ErrorEnvelope),
        (status = 404, description = "No such file for this caller", body = ErrorEnvelope)))]
#[delete("/{id}")]
pub async fn delete_file(
    state: web::Data<AppState>,
    caller: LazyCaller,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state.services.files.delete(caller.request(), &id).await?;
    Ok(no_content())
}
