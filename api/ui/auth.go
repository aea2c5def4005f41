package ui

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"opsq/api/apikeys"
	"opsq/api/wire"
)

// With API keys on (Config.Keys), the dashboard asks for an admin key once, on its login
// page, and exchanges it for a session (DESIGN.md §8; apikeys.NewSession): a random id,
// stored hashed in PostgreSQL so that every instance knows it, ending after 12 h, at
// logout, or as soon as its key is revoked or expires (every request checks the key in the
// instance's cache). The browser keeps the session id, never the key, in a cookie that
// scripts cannot read (HttpOnly), that no other site's page sends (SameSite=Strict), that
// only /ui/ receives, and that is Secure when the page came over TLS or through a proxy
// that says so (X-Forwarded-Proto: https). A request that changes something must come from
// the dashboard's own origin (sameOrigin), and every answer forbids framing (headers). The
// pages' scripts read only /ui/ answers; the cookie is no key for /v1/, which takes keys in
// the Authorization header only.

const cookieName = "opsq_ui_session"

// headers sets on every answer of the dashboard what keeps its pages out of other sites'
// frames and from loading anything but their own files.
func headers(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		return next(c)
	}
}

// sameOrigin refuses (403) a request that changes something (not GET or HEAD) unless its
// Origin, or without one its Referer, is the dashboard's own: another site's page cannot
// make a logged-in browser drain an instance or cancel a submission.
func sameOrigin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			return next(c)
		}
		from := r.Header.Get("Origin")
		if from == "" || from == "null" {
			from = r.Header.Get("Referer")
		}
		u, err := url.Parse(from)
		if from == "" || err != nil || u.Host != r.Host {
			return c.JSON(http.StatusForbidden, wire.ErrorBody{Error: wire.ErrorDetail{Code: "forbidden",
				Message: "the dashboard takes changes from its own pages only (the request's Origin is not this host)"}})
		}
		return next(c)
	}
}

// secure reports whether the browser reached the dashboard over TLS, directly or through a
// proxy that ends TLS and says so.
func secure(c echo.Context) bool {
	return c.IsTLS() || strings.EqualFold(c.Request().Header.Get("X-Forwarded-Proto"), "https")
}

// sessionCookie is the cookie that holds session id (MaxAge -1: delete it).
func sessionCookie(c echo.Context, id string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: cookieName, Value: id, Path: "/ui/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(c)}
}

// authenticate lets through requests of a live session of an admin key; without one, a
// page goes to the login page and anything else gets 401.
func (d *dashboard) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	if d.keys == nil {
		return next
	}
	return func(c echo.Context) error {
		if ck, err := c.Cookie(cookieName); err == nil {
			caller, err := d.keys.Session(c.Request().Context(), ck.Value)
			switch {
			case err == nil && caller.Role == apikeys.Admin:
				return next(c)
			case err != nil && !errors.Is(err, apikeys.ErrNoSession) && !errors.Is(err, apikeys.ErrUnknown) &&
				!errors.Is(err, apikeys.ErrRevoked) && !errors.Is(err, apikeys.ErrExpired):
				return err // the database: a 503 from the error handler, not a login page
			}
		}
		r := c.Request()
		if r.Method != http.MethodGet || strings.HasSuffix(r.URL.Path, ".json") || strings.HasSuffix(r.URL.Path, "/progress") {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="opsq"`)
			return c.JSON(http.StatusUnauthorized, wire.ErrorBody{Error: wire.ErrorDetail{Code: "unauthorized",
				Message: "the dashboard needs an admin key: log in at /ui/login"}})
		}
		return c.Redirect(http.StatusSeeOther, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()))
	}
}

// loginRefused is the login page's answer to every key that does not open the dashboard.
const loginRefused = "this key does not open the dashboard: it is not a valid admin key (unknown, revoked, expired, or of another role)"

// loginView is the login page.
type loginView struct {
	Next  string
	Error string
}

// nextPage is where to go after the login: a page of the dashboard, nothing else.
func nextPage(next string) string {
	if !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "/ui//") || strings.ContainsAny(next, "\\\r\n") {
		return "/ui/"
	}
	return next
}

func (d *dashboard) loginPage(c echo.Context) error {
	if d.keys == nil {
		return c.Redirect(http.StatusSeeOther, "/ui/")
	}
	return d.render(c, http.StatusOK, "login", page{Title: "Log in", Data: loginView{Next: nextPage(c.QueryParam("next"))}})
}

func (d *dashboard) login(c echo.Context) error {
	if d.keys == nil {
		return c.Redirect(http.StatusSeeOther, "/ui/")
	}
	v := loginView{Next: nextPage(c.FormValue("next"))}
	key := strings.TrimSpace(c.FormValue("key"))
	caller, err := d.keys.Check(key)
	// What was wrong goes to the log (naming a known key, never giving a key); the page
	// says the same for every key that does not open the dashboard, so that it tells
	// nobody whether a key exists, was revoked, or has another role.
	why := ""
	switch {
	case key == "":
		why = "missing API key"
	case errors.Is(err, apikeys.ErrUnknown):
		why = "unknown API key"
	case err != nil:
		why = err.Error()
	case caller.Role != apikeys.Admin:
		why = fmt.Sprintf("the key %q has the role %s; the dashboard needs an admin key", caller.Name, caller.Role)
	}
	if why != "" {
		if err := d.authFailed(c, key, "dashboard login: "+why); err != nil {
			return err // 429: too many failures from this address
		}
		v.Error = loginRefused
		if key == "" {
			v.Error = "enter an admin key (opsq keys create --name NAME --role admin prints one)"
		}
		// The form, again, with what was wrong: a page that loaded, 200.
		return d.render(c, http.StatusOK, "login", page{Title: "Log in", Data: v})
	}
	id, err := d.keys.NewSession(c.Request().Context(), caller)
	if err != nil {
		return err
	}
	c.SetCookie(sessionCookie(c, id, int(apikeys.SessionTTL/time.Second)))
	d.log.InfoContext(c.Request().Context(), "dashboard login", "key", caller.Name)
	return c.Redirect(http.StatusSeeOther, v.Next)
}

// logout ends the session on every instance, not only in this browser.
func (d *dashboard) logout(c echo.Context) error {
	if ck, err := c.Cookie(cookieName); err == nil && d.keys != nil {
		if err := d.keys.EndSession(c.Request().Context(), ck.Value); err != nil {
			return err
		}
	}
	c.SetCookie(sessionCookie(c, "", -1))
	return c.Redirect(http.StatusSeeOther, "/ui/login")
}
