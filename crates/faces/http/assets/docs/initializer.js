// Swagger UI of the Admin API under /admin/docs/. The document and every
// "Try it out" request carry the session of the administrator signed in
// through /admin/auth/sign-in (kept in this tab's sessionStorage).
"use strict";

// Where the service is mounted, written in when the file is served.
const BASE = "{{base}}";

window.onload = () => {
  const signIn = () => location.assign(`${BASE}/admin/auth/sign-in?next=${BASE}/admin/docs/`);
  const session = sessionStorage.getItem("tessera.session");
  if (!session) {
    signIn();
    return;
  }
  window.ui = SwaggerUIBundle({
    url: BASE + "/admin/api/openapi",
    dom_id: "#swagger-ui",
    deepLinking: true,
    validatorUrl: null,
    displayOperationId: true,
    requestInterceptor: (request) => {
      request.headers.Authorization = `Bearer ${session}`;
      return request;
    },
    // An ended or refused session: sign in again (as an administrator).
    responseInterceptor: (response) => {
      if ((response.status === 401 || response.status === 403) && response.url.endsWith("/admin/api/openapi")) {
        sessionStorage.removeItem("tessera.session");
        signIn();
      }
      return response;
    },
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    plugins: [SwaggerUIBundle.plugins.DownloadUrl],
    layout: "StandaloneLayout",
  });
};
