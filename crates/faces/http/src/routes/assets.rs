//! Scripts, styles and icons of the pages, embedded in the binary and served
//! under a path that names their version (a hash of their content), so a
//! browser keeps them for a year and asks again only when the binary's
//! assets change. The pages that link them stay `no-store`.

use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::Compress;
use actix_web::{HttpResponse, web};

use crate::routes::pages::secured;

/// An embedded file.
pub(crate) struct Asset {
    /// Its name in the path (`console.js`).
    pub name: &'static str,
    pub content_type: &'static str,
    pub body: &'static str,
}

/// A set of assets served together under one version.
pub(crate) struct AssetSet {
    /// The mount-relative folder (`/admin/assets`).
    folder: &'static str,
    /// The first 16 hex digits of the FNV-1a hash of every name and body.
    version: String,
}

impl AssetSet {
    /// The set of `assets` under `folder`.
    pub(crate) fn new(folder: &'static str, assets: &[Asset]) -> Self {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for asset in assets {
            for byte in asset.name.bytes().chain([0]).chain(asset.body.bytes()) {
                hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        Self {
            folder,
            version: format!("{hash:016x}"),
        }
    }

    /// Where `name` is served, under the mount path `base`.
    pub(crate) fn path(&self, base: &str, name: &str) -> String {
        format!("{base}{}/{}/{name}", self.folder, self.version)
    }

    /// Adds `{folder}/{version}/{name}` for `assets`, compressed when the
    /// browser takes gzip: the current version
    /// is cached for a year; another one (a page loaded before an upgrade)
    /// gets today's file, not kept, so no cache holds it under a wrong name.
    pub(crate) fn register(&self, config: &mut web::ServiceConfig, assets: &'static [Asset]) {
        let current = self.version.clone();
        let resource = web::resource(format!("{}/{{version}}/{{name}}", self.folder))
            .wrap(Compress::default());
        config.service(
            resource.route(web::get().to(move |path: web::Path<(String, String)>| {
                let (version, name) = path.into_inner();
                let answer = match assets.iter().find(|a| a.name == name) {
                    Some(asset) => {
                        let mut answer = secured(asset.content_type, asset.body.to_owned());
                        if version == current {
                            answer.headers_mut().insert(
                                header::CACHE_CONTROL,
                                HeaderValue::from_static("public, max-age=31536000, immutable"),
                            );
                        }
                        answer
                    }
                    None => HttpResponse::NotFound().finish(),
                };
                std::future::ready(answer)
            })),
        );
    }
}

pub(crate) const JAVASCRIPT: &str = "text/javascript; charset=utf-8";
pub(crate) const CSS: &str = "text/css; charset=utf-8";
pub(crate) const SVG: &str = "image/svg+xml";
